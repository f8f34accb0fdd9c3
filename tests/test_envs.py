import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401 - registers the envs

IDS = ["IdentityDiscrete-v0", "IdentityBox-v0", "IdentityMultiDiscrete-v0", "DictObs-v0", "CpuBurn-v0"]


@pytest.mark.parametrize("env_id", IDS)
def test_registered_and_time_limited(env_id):
    env = gym.make(env_id, max_episode_steps=5) if env_id != "CpuBurn-v0" else gym.make(env_id, burn_s=0.0)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    steps, truncated = 0, False
    while not truncated:
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        assert not terminated
        assert env.observation_space.contains(obs)
        steps += 1
    assert steps == (5 if env_id != "CpuBurn-v0" else 100)


def _echo(env_id, obs):
    return obs["target"] if env_id == "DictObs-v0" else obs


@pytest.mark.parametrize("env_id", ["IdentityDiscrete-v0", "IdentityBox-v0", "IdentityMultiDiscrete-v0", "DictObs-v0"])
def test_echo_is_optimal_and_random_is_not(env_id):
    env = gym.make(env_id)
    obs, _ = env.reset(seed=1)
    echo_total = 0.0
    for _ in range(100):
        obs, r, *_ = env.step(_echo(env_id, obs))
        echo_total += r
    env.action_space.seed(12345)  # not 1: same generator as the env's would echo by chance
    obs, _ = env.reset(seed=1)
    rand_total = sum(env.step(env.action_space.sample())[1] for _ in range(100))
    best = 0.0 if env_id == "IdentityBox-v0" else 100.0
    assert echo_total == pytest.approx(best)
    assert rand_total < best - 10


def test_same_seed_same_observations():
    a, b = gym.make("IdentityBox-v0"), gym.make("IdentityBox-v0")
    np.testing.assert_array_equal(a.reset(seed=3)[0], b.reset(seed=3)[0])
    np.testing.assert_array_equal(a.step(a.action_space.sample())[0], b.step(b.action_space.sample())[0])


def test_cpu_burn_uses_cpu_time():
    import time

    env = gym.make("CpuBurn-v0", burn_s=0.005)
    env.reset(seed=0)
    t = time.thread_time()
    for _ in range(4):
        env.step(0)
    assert time.thread_time() - t >= 0.02
    with pytest.raises(ValueError, match="burn_s"):
        gym.make("CpuBurn-v0", burn_s=-1.0)

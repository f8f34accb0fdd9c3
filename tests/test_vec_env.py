"""DummyVecEnv and the VecEnv contract."""

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401
from common.vec_env import (
    ClosedVecEnvError,
    DummyVecEnv,
    EnvWorkerError,
    NotSteppingError,
    tile_images,
)
from common.wrappers.monitor import Monitor


def make(env_id, n, **kw):
    return DummyVecEnv([lambda: gym.make(env_id, **kw) for _ in range(n)])


def test_matches_hand_loop_with_autoreset():
    n = 3
    venv = make("CartPole-v1", n)
    venv.seed(7)
    obs = venv.reset()
    hand = [gym.make("CartPole-v1") for _ in range(n)]
    hand_obs = np.stack([e.reset(seed=7 + i)[0] for i, e in enumerate(hand)])
    np.testing.assert_array_equal(obs, hand_obs)
    rng = np.random.default_rng(0)
    finished = 0
    for _ in range(200):
        actions = rng.integers(0, 2, n)
        obs, rews, dones, infos = venv.step(actions)
        assert rews.dtype == np.float32 and dones.dtype == bool and obs.dtype == np.float32
        for i, e in enumerate(hand):
            o, _, term, trunc, _ = e.step(actions[i])
            assert dones[i] == (term or trunc)
            if dones[i]:
                finished += 1
                np.testing.assert_array_equal(infos[i]["terminal_observation"], o)
                assert infos[i]["TimeLimit.truncated"] is False  # CartPole falls well before 500
                o, _ = e.reset()
            else:
                assert "terminal_observation" not in infos[i]
            np.testing.assert_array_equal(obs[i], o)
    assert finished > 5


def test_truncation_flag_on_time_limit():
    venv = make("IdentityDiscrete-v0", 2, max_episode_steps=4)
    venv.reset()
    for t in range(1, 9):
        _, _, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
        assert dones.tolist() == [t % 4 == 0] * 2
        if t % 4 == 0:
            assert infos[0]["TimeLimit.truncated"] is True
            assert venv.observation_space.contains(infos[0]["terminal_observation"])


def test_returned_arrays_are_copies():
    venv = make("CartPole-v1", 2)
    o1 = venv.reset()
    o1_saved = o1.copy()
    o2, *_ = venv.step([0, 1])
    venv.step([1, 0])
    np.testing.assert_array_equal(o1, o1_saved)
    assert not np.shares_memory(o1, o2)


def test_dict_obs():
    venv = make("DictObs-v0", 3)
    obs = venv.reset()
    assert set(obs) == {"target", "noise"}
    assert obs["target"].shape == (3,) and obs["noise"].shape == (3, 2)
    obs, rews, _, _ = venv.step(obs["target"])
    np.testing.assert_array_equal(rews, [1, 1, 1])


def test_tuple_obs():
    class TupleEnv(gym.Env):
        observation_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(0, 1, (2,))))
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self.observation_space.sample(), {}

        def step(self, a):
            return (1, np.full(2, 0.5, np.float32)), 0.0, False, False, {}

    venv = DummyVecEnv([TupleEnv, TupleEnv])
    venv.reset()
    obs, *_ = venv.step([0, 0])
    assert isinstance(obs, tuple) and len(obs) == 2
    np.testing.assert_array_equal(obs[0], [1, 1])
    np.testing.assert_array_equal(obs[1], np.full((2, 2), 0.5))


def test_misuse_raises_clear_errors():
    venv = make("CartPole-v1", 2)
    venv.reset()
    with pytest.raises(ValueError, match="got 3 actions for 2 envs"):
        venv.step([0, 1, 0])
    with pytest.raises(NotSteppingError, match="step_async"):
        venv.step_wait()
    venv.close()
    venv.close()  # idempotent
    with pytest.raises(ClosedVecEnvError, match="closed"):
        venv.step([0, 1])
    with pytest.raises(ClosedVecEnvError):
        venv.reset()


def test_same_instance_refused():
    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match="same env instance"):
        DummyVecEnv([lambda: env] * 2)
    shared = {"e": env}
    with pytest.raises(ValueError, match="same env instance"):
        DummyVecEnv([lambda: shared["e"]] * 2)  # not a captured env: caught by identity of the results


def test_env_error_names_index():
    class Boom(gym.Env):
        observation_space = gym.spaces.Discrete(2)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return 0, {}

        def step(self, a):
            raise RuntimeError("kaboom")

    venv = DummyVecEnv([lambda: gym.make("IdentityDiscrete-v0", n=2), Boom])
    venv.reset()
    with pytest.raises(EnvWorkerError, match="env 1 raised RuntimeError: kaboom"):
        venv.step([0, 0])


def test_attr_method_wrapped_seed():
    venv = DummyVecEnv([lambda: Monitor(gym.make("IdentityDiscrete-v0", n=5)), lambda: gym.make("IdentityDiscrete-v0", n=5)])
    assert venv.get_attr("n") == [5, 5]
    venv.set_attr("n", 3, indices=1)
    assert venv.get_attr("n", indices=[1]) == [3]
    assert venv.env_is_wrapped(Monitor) == [True, False]
    assert venv.env_method("get_total_steps", indices=0) == [0]
    seeds = venv.seed(10)
    assert seeds == [10, 11]
    a = venv.reset()
    venv.seed(10)
    b = venv.reset()
    np.testing.assert_array_equal(a, b)
    c = venv.reset()  # seeds are used once
    venv.seed(10)
    s1 = [venv.action_space.sample() for _ in range(3)]
    assert venv.envs[0].action_space.sample() is not None
    del c, s1


def test_render_rgb_array_tiles():
    venv = DummyVecEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array") for _ in range(3)])
    venv.reset()
    img = venv.render("rgb_array")
    h, w, c = venv.get_images()[0].shape
    assert img.shape == (2 * h, 2 * w, c)
    with pytest.raises(ValueError, match="render mode"):
        venv.render("bogus")
    venv.close()


def test_tile_images_layout():
    imgs = np.arange(3 * 2 * 2 * 1).reshape(3, 2, 2, 1)
    big = tile_images(imgs)
    assert big.shape == (4, 4, 1)
    np.testing.assert_array_equal(big[:2, :2], imgs[0])
    np.testing.assert_array_equal(big[:2, 2:], imgs[1])
    np.testing.assert_array_equal(big[2:, :2], imgs[2])
    assert big[2:, 2:].sum() == 0

"""baselines' her tricks as settings of ddpg and td3: TD-target bounds, uniformly random exploration actions and
a floor under the observation normalisation's standard deviation; off by default (the old behaviour exactly)."""
import numpy as np
import pytest
import tensorflow as tf
from gymnasium import spaces

from algos.ddpg.model import DDPGModel
from algos.offpolicy.exploration import Explorer
from algos.td3.model import TD3Model
from common.errors import ConfigError

OBS, ACT = spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (2,), np.float32)
SMALL = {"num_hidden": [16, 16]}


def _targets(model, rewards: np.ndarray) -> np.ndarray:
    r, o2, d = tf.constant(rewards), tf.zeros((len(rewards), 3)), tf.zeros(len(rewards))
    if isinstance(model, TD3Model):
        return model._critic_target(r, o2, d, tf.zeros((len(rewards), 2))).numpy()
    q_next = model._q(model.target_critic, o2, tf.tanh(model.target_actor(o2)))
    return model._bounded_target(r + model.gamma * q_next).numpy()


@pytest.mark.parametrize("model_class", [DDPGModel, TD3Model])
def test_td_targets_stay_within_the_bounds(model_class):
    rewards = np.array([-100.0, -1.0, 0.0, 5.0], np.float32)
    free = _targets(model_class(OBS, ACT, network_kwargs=SMALL, seed=0), rewards)
    bounded = _targets(model_class(OBS, ACT, network_kwargs=SMALL, seed=0, target_min=-50.0, target_max=0.0), rewards)
    np.testing.assert_allclose(bounded, np.clip(free, -50.0, 0.0), rtol=1e-6)
    assert free.min() < -50.0 and free.max() > 0.0  # the bounds did something


def test_ddpg_training_step_uses_the_bounded_target():
    model = DDPGModel(OBS, ACT, network_kwargs=SMALL, seed=0, target_max=0.0)
    rng = np.random.default_rng(0)
    batch = {"obs": rng.normal(size=(1, 8, 3)).astype(np.float32), "actions": rng.uniform(-1, 1, (1, 8, 2)).astype(np.float32),
             "rewards": np.full((1, 8), 3.0, np.float32), "next_obs": rng.normal(size=(1, 8, 3)).astype(np.float32),
             "dones": np.zeros((1, 8), np.float32)}
    assert model.train(batch)["target_q_mean"] == pytest.approx(0.0)


def test_crossed_bounds_are_one_line():
    with pytest.raises(ConfigError, match=r"target_min \(1.0\) must not exceed target_max \(0.0\)"):
        DDPGModel(OBS, ACT, network_kwargs=SMALL, target_min=1.0, target_max=0.0)


def test_random_action_share_replaces_that_share_of_actions_with_uniform_ones():
    model = DDPGModel(OBS, ACT, network_kwargs=SMALL, seed=0)
    x = np.zeros((4000, 3), np.float32)
    greedy = model.act_unit(x)
    none = Explorer(model, None, None, 4000, np.random.default_rng(0)).actions(x)
    np.testing.assert_array_equal(none, np.clip(greedy, -1, 1))
    mixed = Explorer(model, None, None, 4000, np.random.default_rng(0), random_action_share=0.3).actions(x)
    replaced = np.any(mixed != none, axis=1)
    assert 0.27 < replaced.mean() < 0.33
    assert mixed.min() >= -1.0 and mixed.max() <= 1.0
    assert np.std(mixed[replaced]) == pytest.approx(1 / np.sqrt(3), rel=0.1)  # uniform on [-1, 1]


def test_obs_std_min_floors_the_normalisation_only_when_set():
    rng = np.random.default_rng(0)
    stats = np.stack([np.zeros(1000), rng.normal(size=1000), 5 + 1e-3 * rng.normal(size=1000)], 1).astype(np.float32)
    for floor in (0.0, 0.01):
        model = DDPGModel(OBS, ACT, network_kwargs=SMALL, seed=0, normalize_observations=True, obs_std_min=floor)
        model.update_obs_stats(stats)
        model.push_obs_stats()
        plain = np.sqrt(model.obs_rms.var + 1e-8)
        assert plain[0] < 0.01 and plain[2] < 0.01 and plain[1] > 0.5  # two columns under the floor
        np.testing.assert_allclose(model.obs_std.numpy(), np.maximum(plain, floor), rtol=1e-6)


def test_her_with_the_baselines_settings_runs_and_refuses_them_for_sac():
    import envs  # noqa: F401  (registers BitFlipping-v0)
    from algos.her.her import learn
    from runner.env_factory import make_vec_env

    venv = make_vec_env("BitFlipping-v0", "envs", 2, 0, env_kwargs={"n_bits": 4}, flatten_dict_observations=False)
    with pytest.raises(ConfigError, match="random_action_share is for her_algorithm td3 or ddpg"):
        learn(env=venv, total_timesteps=100, seed=0, random_action_share=0.3)
    with pytest.raises(ConfigError, match="action_l2 is for her_algorithm td3 or ddpg"):
        learn(env=venv, total_timesteps=100, seed=0, her_algorithm="tqc", action_l2=1.0)
    model = learn(env=venv, total_timesteps=300, seed=0, her_algorithm="ddpg", learning_starts=100, num_hidden=16,
                  train_freq=50, gradient_steps=2, random_action_share=0.3, target_min=-50.0, target_max=0.0,
                  obs_std_min=0.01, action_l2=1.0)
    venv.close()
    assert (model.target_min, model.target_max, model.obs_std_min, model.action_l2) == (-50.0, 0.0, 0.01, 1.0)

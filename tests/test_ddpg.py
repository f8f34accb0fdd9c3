"""ddpg: action scaling, per-env noise resets, truncation bootstrap, param-noise adaption, Pop-Art,
learning the identity Box env (its file keeps the observation statistics) and one-line errors."""
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
from gymnasium import spaces

import envs  # noqa: F401  (registers the test envs)
from algos.ddpg import ddpg as ddpg_mod
from algos.ddpg.ddpg import learn, load
from algos.ddpg.model import DDPGModel
from algos.hyperparameters import shipped_entry
from algos.offpolicy.exploration import Explorer
from common.buffers.replay import terminal_aware_next
from common.errors import ConfigError
from common.noise import AdaptiveParamNoiseSpec, OrnsteinUhlenbeckActionNoise
from common.vec_env import DummyVecEnv
from common.wrappers.monitor import Monitor

SMALL = {"num_hidden": 32, "num_layers": 2}


def test_actions_scaled_to_asymmetric_bounds():
    box = spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([1.0, 5.0], np.float32))
    model = DDPGModel(spaces.Box(-1, 1, (3,), np.float32), box, network_kwargs=SMALL, seed=0)
    unit = np.array([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]], np.float32)
    np.testing.assert_allclose(model.scale_actions(unit), [[-2.0, 0.0], [1.0, 5.0], [-0.5, 2.5]])
    np.testing.assert_allclose(model.unscale_actions(model.scale_actions(unit)), unit, atol=1e-6)
    actions, state = model.predict(np.random.default_rng(0).uniform(-1, 1, (64, 3)))
    assert state is None and actions.shape == (64, 2)
    assert np.all(actions >= box.low) and np.all(actions <= box.high)


def test_numpy_actor_matches_tensorflow_actor():
    model = DDPGModel(spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (2,), np.float32),
                      network_kwargs={"num_hidden": [16, 8], "activation": "relu"}, seed=0)
    model.obs_rms.update(np.random.default_rng(1).normal(2.0, 3.0, (100, 3)))
    model.push_obs_stats()
    model.sync()
    x = np.random.default_rng(2).normal(2.0, 3.0, (5, 3)).astype(np.float32)
    np.testing.assert_allclose(model.act_unit(x), model._tf_act(x).numpy(), atol=1e-5)


class _RecordingOU(OrnsteinUhlenbeckActionNoise):
    instances: ClassVar[list] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.resets, self.states_before = [], []
        _RecordingOU.instances.append(self)

    def reset(self, indices=None):
        if indices is not None:
            self.resets.append(list(np.asarray(indices)))
            self.states_before.append(self.x.copy())
        super().reset(indices)
        if indices is not None:
            self.states_after = self.x.copy()


def test_learn_resets_only_the_finished_envs_noise(monkeypatch):
    _RecordingOU.instances = []
    monkeypatch.setattr(ddpg_mod, "parse_noise_type", lambda text, shape, n, rng: (
        _RecordingOU(np.zeros(shape), np.full(shape, 0.3), n, rng=rng), None))
    env = DummyVecEnv([lambda: Monitor(gym.make("IdentityBox-v0", max_episode_steps=5)),
                       lambda: Monitor(gym.make("IdentityBox-v0", max_episode_steps=1000))])
    learn(env=env, total_timesteps=40, seed=0, noise_type="ou_0.3", nb_rollout_steps=10, nb_train_steps=1,
          batch_size=4, learning_starts=0, **SMALL)
    noise = _RecordingOU.instances[-1]
    assert noise.resets == [[0]] * 4  # env 0 finished at steps 5, 10, 15, 20; env 1 never did
    before, after = noise.states_before[-1], noise.states_after
    np.testing.assert_array_equal(after[0], 0.0)
    np.testing.assert_array_equal(after[1], before[1])
    assert np.all(before[1] != 0)


def test_truncation_bootstraps_and_termination_does_not():
    model = DDPGModel(spaces.Box(-1, 1, (2,), np.float32), spaces.Box(-1, 1, (1,), np.float32),
                      network_kwargs=SMALL, seed=0)
    next_x = np.zeros((3, 2), np.float32)
    infos = [{"terminal_observation": np.array([1.0, 1.0], np.float32), "TimeLimit.truncated": True},
             {"terminal_observation": np.array([2.0, 2.0], np.float32), "TimeLimit.truncated": False}, {}]
    encode = model.encoder.encode_list
    stored, terminated = terminal_aware_next(next_x, np.array([True, True, False]), infos, encode)
    np.testing.assert_array_equal(terminated, [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(stored, [[1, 1], [2, 2], [0, 0]])
    stored, terminated = terminal_aware_next(next_x, np.zeros(3, bool), infos, encode)
    assert stored is next_x and not terminated.any()


@pytest.mark.parametrize("start, desired", [(2.0, 0.1), (1e-3, 0.1)])
def test_param_noise_adaption_moves_scale_toward_target_distance(start, desired):
    model = DDPGModel(spaces.Box(-1, 1, (4,), np.float32), spaces.Box(-1, 1, (2,), np.float32),
                      network_kwargs={"num_hidden": 32, "layer_norm": True}, seed=0)
    spec = AdaptiveParamNoiseSpec(initial_stddev=start, desired_action_stddev=desired, adoption_coefficient=1.1)
    explorer = Explorer(model, None, spec, n_envs=2, rng=np.random.default_rng(0))
    obs = np.random.default_rng(1).uniform(-1, 1, (256, 4)).astype(np.float32)
    distances = [explorer.adapt(obs) for _ in range(120)]
    first, last = distances[0], float(np.mean(distances[-20:]))
    assert abs(np.log(last / desired)) < 0.5 * abs(np.log(first / desired))
    assert abs(np.log(last / desired)) < np.log(2.0)
    assert (spec.current_stddev < start) == (first > desired)
    # each env acts with its own perturbed actor
    acts = explorer.actions(np.repeat(obs[:1], 2, axis=0))
    assert not np.allclose(acts[0], acts[1])


def test_popart_preserves_critic_outputs():
    model = DDPGModel(spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (1,), np.float32),
                      network_kwargs=SMALL, seed=0, normalize_returns=True, popart=True)
    x = tf.constant(np.random.default_rng(0).uniform(-1, 1, (16, 4)).astype(np.float32))
    before = model._denorm_ret(model.critic(x)[:, 0]).numpy()
    model._update_ret_stats(tf.constant(np.random.default_rng(1).normal(-50.0, 10.0, 256).astype(np.float32)))
    assert model.ret_mean.numpy() == pytest.approx(-50.0, abs=2.0)
    assert np.sqrt(model.ret_var.numpy()) == pytest.approx(10.0, rel=0.15)
    np.testing.assert_allclose(model._denorm_ret(model.critic(x)[:, 0]).numpy(), before, rtol=1e-4, atol=1e-4)


def test_learns_identity_box_and_round_trips_through_a_model_file(tmp_path, monitored_venv):
    env = monitored_venv("IdentityBox-v0", 2)
    model = learn(env=env, total_timesteps=2000, seed=0, noise_type="normal_0.1", batch_size=64,
                  nb_rollout_steps=25, nb_train_steps=25, actor_lr=1e-3, critic_l2_reg=0.0, gamma=0.5,
                  normalize_observations=True, learning_starts=0, tau=0.01, num_hidden=64)
    obs = np.random.default_rng(3).uniform(-1, 1, (500, 2)).astype(np.float32)
    actions, _ = model.predict(obs)
    per_step = -np.mean((actions - obs) ** 2)
    assert per_step > -0.1  # a random policy scores -2/3, the zero policy -1/3
    assert model.obs_rms.count > 1000  # observation statistics were collected

    path = str(tmp_path / "ddpg.zip")
    model.save(path)
    loaded = load(path, env)
    np.testing.assert_array_equal(loaded.predict(obs)[0], actions)
    np.testing.assert_allclose(loaded.obs_rms.mean, model.obs_rms.mean)
    assert np.load(path, allow_pickle=False)["obs_rms/mean"].shape == (2,)


def test_fallback_network_is_recorded_in_the_model_file_and_old_files_keep_theirs(tmp_path):
    env = DummyVecEnv([lambda: gym.make("IdentityBox-v0")])
    model = learn(env=env, total_timesteps=0, seed=0)
    assert model.network_kwargs == ddpg_mod.FALLBACK_MLP  # 400x300 ReLU where no network parameters are given
    path = str(tmp_path / "fallback.zip")
    model.save(path)
    assert load(path).network_kwargs == ddpg_mod.FALLBACK_MLP
    assert learn(env=env, total_timesteps=0, seed=0, num_layers=1).network_kwargs == {"num_layers": 1}
    old = DDPGModel(env.observation_space, env.action_space, seed=0)  # a file of the earlier default (no kwargs)
    old.save(str(tmp_path / "old.zip"))
    x = np.zeros((1, 2), np.float32)
    np.testing.assert_array_equal(load(str(tmp_path / "old.zip")).predict(x)[0], old.predict(x)[0])


def test_non_box_action_space_is_one_clear_error():
    env = DummyVecEnv([lambda: gym.make("IdentityDiscrete-v0")])
    with pytest.raises(ConfigError, match="Box") as info:
        learn(env=env, total_timesteps=10)
    assert isinstance(info.value, ConfigError) and "\n" not in str(info.value)


def test_unknown_noise_type_is_one_clear_error(monitored_venv):
    with pytest.raises(ConfigError, match="unknown noise type 'gauss_0.2'") as info:
        learn(env=monitored_venv("IdentityBox-v0", 1), total_timesteps=10, noise_type="gauss_0.2")
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_pendulum_reaches_minus_200_with_the_shipped_entry(monitored_venv):
    """The shipped Pendulum-v1 entry on one seed (under a minute on 2 cores); a random policy scores about -1200."""
    from runner.play import play

    env = monitored_venv("Pendulum-v1", 1)
    model = learn(env=env, total_timesteps=20_000, seed=0,
                  **{**shipped_entry("ddpg", "classic_control", "Pendulum-v1"), "log_interval": 10**9})
    eval_env = monitored_venv("Pendulum-v1", 1, seed=1000)
    result = play(model, eval_env, episodes=10, out=lambda s: None)
    assert np.mean(result.returns) >= -200.0


def test_log_lines_and_checkpoints_in_env_steps_are_loadable(csv_log_dir, monitored_venv):
    import csv

    learn(env=monitored_venv("IdentityBox-v0", 1), total_timesteps=200,
          seed=0, nb_rollout_steps=50, nb_train_steps=5, batch_size=16, log_interval=2, save_interval=100,
          noise_type="ou_0.2", **SMALL)
    with open(csv_log_dir / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["time/total_timesteps"]) for r in rows] == [100, 200]
    returns = [float(r["rollout/ep_rew_mean"]) for r in rows]
    assert all(-400.0 <= e < 0.0 for e in returns)  # finished 100-step episodes, rewards in [-4, 0]
    checkpoints = sorted((csv_log_dir / "checkpoints").iterdir())
    assert [p.name for p in checkpoints] == ["0000000100.zip", "0000000200.zip"]
    assert load(str(checkpoints[-1])).num_timesteps == 200

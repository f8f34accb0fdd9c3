import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the identity envs)
from algos.hyperparameters import shipped_entry
from algos.ppo2 import ppo2
from common.nn import tf_util

pytestmark = pytest.mark.usefixtures("csv_log_dir")


def mean_step_reward(model, venv, steps: int = 100) -> float:
    """The mean reward per step of ``model`` acting in ``venv`` (closed after)."""
    obs = venv.reset()
    total = 0.0
    state = model.initial_state(venv.num_envs)
    starts = np.ones(venv.num_envs, bool)
    for _ in range(steps):
        actions, state = model.predict(obs, state=state, episode_start=starts)
        obs, rewards, starts, _ = venv.step(actions)
        total += float(rewards.mean())
    venv.close()
    return total / steps


FAST = {"nsteps": 64, "nminibatches": 2, "noptepochs": 4, "lr": 3e-3, "log_interval": 1000}


@pytest.mark.parametrize(
    "env_id,steps,threshold,random_score,kwargs",
    [
        ("IdentityDiscrete-v0", 6000, 0.95, 0.25, {}),
        ("IdentityMultiDiscrete-v0", 20000, 0.95, 0.3, {"lr": 1e-2}),
        ("IdentityBox-v0", 20000, -0.03, -0.7, {"gamma": 0.0}),
    ],
)
def test_identity_envs_are_learned(env_id, steps, threshold, random_score, kwargs, monitored_venv):
    venv = monitored_venv(env_id, 4, seed=0)
    model = ppo2.learn(env=venv, network="mlp", total_timesteps=steps, seed=0, **{**FAST, **kwargs})
    venv.close()
    score = mean_step_reward(model, monitored_venv(env_id, 4, seed=123))
    assert score >= threshold, f"{env_id}: mean step reward {score}"
    # the same assertion fails for a random policy
    rnd = monitored_venv(env_id, 4, seed=0)
    rnd.reset()
    rr = np.mean([rnd.step(np.array([rnd.action_space.sample() for _ in range(4)]))[1].mean() for _ in range(100)])
    assert rr < threshold and rr == pytest.approx(random_score, abs=0.2)


def test_training_continues_from_a_model_file(tmp_path, monitored_venv):
    venv = monitored_venv("IdentityBox-v0", 4, seed=0)
    model = ppo2.learn(env=venv, network="mlp", total_timesteps=512, seed=1, nsteps=64, log_interval=1000,
                       num_hidden=16)
    path = str(tmp_path / "model.zip")
    model.save(path)
    model2 = ppo2.learn(env=venv, network="mlp", total_timesteps=256, seed=2, nsteps=64, load_path=path,
                        log_interval=1000, num_hidden=16)
    assert model2.num_timesteps == 512 + 256


def test_lstm_policy_runs_saves_and_loads(tmp_path, monitored_venv):
    venv = monitored_venv("IdentityDiscrete-v0", 4, seed=0)
    model = ppo2.learn(env=venv, network="lstm", total_timesteps=256, seed=0, nsteps=32, nminibatches=2,
                       noptepochs=1, log_interval=1000, nlstm=8)
    path = str(tmp_path / "lstm.zip")
    model.save(path)
    loaded = ppo2.load(path, env=venv)
    obs = venv.reset()
    state = model.initial_state(4)
    assert state.shape == (4, 16)
    a1, s1 = model.predict(obs, state=state, episode_start=np.ones(4, bool))
    a2, s2 = loaded.predict(obs, state=state, episode_start=np.ones(4, bool))
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_allclose(s1, s2, atol=1e-6)
    assert np.abs(s1).sum() > 0


def test_dict_observations_and_bad_arguments(monitored_venv):
    venv = monitored_venv("DictObs-v0", 4, seed=0)
    model = ppo2.learn(env=venv, total_timesteps=256, seed=0, nsteps=32, log_interval=1000)
    assert model.predict(venv.reset())[0].shape == (4,)
    with pytest.raises(ValueError, match="smaller than nminibatches"):
        ppo2.learn(env=venv, total_timesteps=256, nsteps=1, nminibatches=5)
    with pytest.raises(ValueError, match=r"nsteps must be at least 0 \(hyperparams/ppo2.toml \[ranges\]\)"):
        ppo2.learn(env=venv, total_timesteps=256, nsteps=-1)
    with pytest.raises(ValueError, match="does not accept not_a_param"):
        ppo2.learn(env=venv, total_timesteps=256, nsteps=32, not_a_param=1)


def test_automatic_rollout_and_minibatches_follow_the_env_count(monitored_venv):
    for nenvs, nsteps, nminibatches in ((1, 2048, 32), (8, 256, 32), (3, 683, 32), (256, 16, 64)):
        model = ppo2.learn(env=monitored_venv("IdentityDiscrete-v0", nenvs), total_timesteps=0, seed=0)
        assert (model.hyperparameters["nsteps"], model.hyperparameters["nminibatches"]) == (nsteps, nminibatches)


@pytest.mark.slow
def test_cartpole_is_solved_with_classic_control_defaults(monitored_venv):
    venv = monitored_venv("CartPole-v1", 8, seed=0)
    kwargs = shipped_entry("ppo2", env_id="CartPole-v1")
    model = ppo2.learn(env=venv, network="mlp", total_timesteps=100_000, seed=0, **kwargs)
    # deterministic evaluation of the final model, 10 episodes; a random policy averages ~22. (The
    # last-100 training-episode mean, sampled actions, was 467.9 for this seed on the AVX-512 machine.)
    from runner.play import play

    result = play(model, monitored_venv("CartPole-v1", 1, seed=1000), episodes=10, out=lambda s: None)
    assert float(np.mean(result.returns)) >= 475


def test_xla_only_for_mlp_policies() -> None:
    """XLA's CPU convolutions are ~37x slower than TF's own kernels: only MLP updates are compiled."""
    from algos.ppo2.model import PPO2Model

    image = gym.spaces.Box(0, 255, (36, 36, 4), np.uint8)
    vector = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    act = gym.spaces.Discrete(3)
    assert PPO2Model(vector, act, network="mlp", seed=0).jit_compile
    assert not PPO2Model(image, act, network="cnn_small", seed=0).jit_compile
    assert not PPO2Model(image, act, network="board_cnn", seed=0).jit_compile  # numpy acting, but convolutions
    assert not PPO2Model(vector, act, network="lstm", seed=0).jit_compile


def test_xla_only_where_the_run_is_long_enough_to_repay_it(monitored_venv):
    from common.errors import ConfigError

    assert tf_util.xla_pays("auto", tf_util.XLA_MIN_GRADIENT_STEPS) and not tf_util.xla_pays("auto", 9_999)
    assert tf_util.xla_pays(True, 0) and not tf_util.xla_pays(False, 10**9)
    with pytest.raises(ConfigError, match="jit_compile"):
        tf_util.xla_pays("sometimes", 0)
    # 2 updates of 2048 samples x 10 epochs x 32 minibatches = 640 gradient steps: too short for XLA
    model = ppo2.learn(env=monitored_venv("IdentityDiscrete-v0", 1), total_timesteps=4096, seed=0)
    assert model.hyperparameters["jit_compile"] is False and model.jit_compile is False


def _value_loss_of_one_step(clip_value_loss: bool) -> tuple[float, float]:
    """(value loss the update reports, the plain 0.5 * mean squared error) for one full-batch gradient step on
    returns far from the stored values, so that the value clip is active."""
    from gymnasium import spaces

    from algos.ppo2.model import PPO2Model

    model = PPO2Model(spaces.Box(-1.0, 1.0, (3,), np.float32), spaces.Discrete(2), seed=0, jit_compile=False,
                      clip_value_loss=clip_value_loss)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(16, 3)).astype(np.float32)
    actions = rng.integers(0, 2, 16)
    values = model.value(obs).astype(np.float32)
    returns = values + 5.0  # far outside the clip range of the prediction's change
    _, _, neglogps = model.policy.act(obs, rng)[:3]
    loss = model.train(0.0, 0.2, obs, actions, returns, values - 1.0, neglogps, np.arange(16, dtype=np.int32)[None])
    plain = 0.5 * float(np.mean(np.square(model.value(obs) - returns)))
    return loss["value_loss"], plain


def test_value_loss_is_clipped_unless_clip_value_loss_is_false() -> None:
    clipped, plain = _value_loss_of_one_step(True)
    assert clipped > plain + 1.0  # the clipped prediction (stored value -1 +- 0.2) is further from the returns
    unclipped, plain = _value_loss_of_one_step(False)
    assert unclipped == pytest.approx(plain, rel=1e-5)


def test_numpy_acting_follows_every_update_and_a_sync(monitored_venv) -> None:
    """Acting reads the weights each fused update writes into one array (in place), and again after sync()
    replaced them (a load)."""
    from algos.ppo2.model import PPO2Model

    venv = monitored_venv("CartPole-v1", 2, seed=0)
    model = ppo2.learn(env=venv, network="mlp", total_timesteps=256, seed=0, **{**FAST, "nsteps": 32})
    obs = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)

    def tf_values() -> np.ndarray:
        return model.policy.values(obs).numpy()

    np.testing.assert_allclose(model.value(obs), tf_values(), rtol=1e-5, atol=1e-6)
    other = PPO2Model(venv.observation_space, venv.action_space, seed=7)
    model.set_arrays(other.get_arrays())  # replaces acting's arrays (sync)
    np.testing.assert_allclose(model.value(obs), tf_values(), rtol=1e-5, atol=1e-6)
    st_obs = np.random.default_rng(2).normal(size=(8, 4)).astype(np.float32)
    acts, values, neglogps, _ = model.policy.act(st_obs, np.random.default_rng(3))
    model.train(1e-2, 0.2, st_obs, acts, values + 1.0, values, neglogps, np.arange(8, dtype=np.int32)[None])
    np.testing.assert_allclose(model.value(obs), tf_values(), rtol=1e-5, atol=1e-6)
    venv.close()

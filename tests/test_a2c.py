"""A2C: RMSProp as TF1 defines it, n-step returns from GAE with lam = 1, learning an identity env, recurrent policies."""
import numpy as np
import pytest
import tensorflow as tf

from algos.a2c import a2c
from common.buffers.rollout import compute_gae
from common.nn.tf_util import RMSProp
from tests.test_ppo2 import mean_step_reward

pytestmark = pytest.mark.usefixtures("csv_log_dir")


def test_rmsprop_follows_tf1_baselines_formula() -> None:
    """ms starts at 1, ms <- a * ms + (1 - a) * g^2, var <- var - lr * g / sqrt(ms + eps), two steps."""
    var = tf.Variable([1.0, -2.0, 0.5])
    opt = RMSProp([var], decay=0.9, epsilon=1e-5)
    expected, ms = np.array([1.0, -2.0, 0.5]), np.ones(3)
    for g in (np.array([0.3, -1.0, 2.0]), np.array([-0.1, 0.5, 1.0])):
        opt.apply([tf.constant(g, tf.float32)], 0.01)
        ms = 0.9 * ms + 0.1 * g**2
        expected = expected - 0.01 * g / np.sqrt(ms + 1e-5)
    np.testing.assert_allclose(var.numpy(), expected, rtol=1e-6)
    restored = RMSProp([tf.Variable(tf.zeros(3))])
    restored.load_state_arrays(opt.state_arrays())
    np.testing.assert_allclose(restored.state_arrays()["ms0"], ms, rtol=1e-6)


def test_rmsprop_pytorch_style_follows_torch_formula() -> None:
    """rmsprop "pytorch": ms starts at 0, var <- var - lr * g / (sqrt(ms) + eps) (torch.optim.RMSprop), two steps."""
    var = tf.Variable([1.0, -2.0, 0.5])
    opt = RMSProp([var], decay=0.9, epsilon=1e-5, style="pytorch")
    expected, ms = np.array([1.0, -2.0, 0.5]), np.zeros(3)
    for g in (np.array([0.3, -1.0, 2.0]), np.array([-0.1, 0.5, 1.0])):
        opt.apply([tf.constant(g, tf.float32)], 0.01)
        ms = 0.9 * ms + 0.1 * g**2
        expected = expected - 0.01 * g / (np.sqrt(ms) + 1e-5)
    np.testing.assert_allclose(var.numpy(), expected, rtol=1e-6)


def test_an_unknown_rmsprop_style_is_one_line() -> None:
    with pytest.raises(ValueError, match="rmsprop must be one of tf1, pytorch, got 'keras'"):
        RMSProp([tf.Variable(tf.zeros(3))], style="keras")


def test_gae_with_lambda_one_gives_n_step_returns() -> None:
    """baselines' a2c targets: discounted rewards to the end of the rollout plus gamma^k V(last), cut at dones."""
    rng = np.random.default_rng(0)
    rewards, values = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(5, 3)).astype(np.float32)
    dones = np.zeros((5, 3), bool)
    dones[2, 1] = True
    last = rng.normal(size=3).astype(np.float32)
    _, returns = compute_gae(rewards, values, dones, last, 0.9, 1.0)
    for e in range(3):
        ret = last[e]
        for t in range(4, -1, -1):
            ret = rewards[t, e] + 0.9 * ret * (1.0 - dones[t, e])
            assert returns[t, e] == pytest.approx(ret, rel=1e-5, abs=1e-5)


def test_a2c_learns_the_identity_env(monitored_venv) -> None:
    venv = monitored_venv("IdentityDiscrete-v0", 4, seed=0)
    model = a2c.learn(env=venv, total_timesteps=2400, seed=0, lr=1e-2, ent_coef=0.0, log_interval=1000)
    venv.close()
    assert model.num_timesteps == 2400
    # a random policy scores 0.25 per step (tests/test_ppo2.py checks that figure)
    assert mean_step_reward(model, monitored_venv("IdentityDiscrete-v0", 4, seed=123)) >= 0.95


def test_lstm_policy_trains_saves_and_loads(tmp_path, monitored_venv) -> None:
    venv = monitored_venv("IdentityDiscrete-v0", 4, seed=0)
    model = a2c.learn(env=venv, network="lstm", total_timesteps=200, seed=0, log_interval=1000, nlstm=8)
    path = str(tmp_path / "lstm.zip")
    model.save(path)
    loaded = a2c.load(path, env=venv)
    obs, starts = venv.reset(), np.ones(4, bool)
    a1, s1 = model.predict(obs, state=model.initial_state(4), episode_start=starts)
    a2, s2 = loaded.predict(obs, state=loaded.initial_state(4), episode_start=starts)
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_allclose(s1, s2, atol=1e-6)
    assert s1.shape == (4, 16) and np.abs(s1).sum() > 0
    saved, restored = model.get_arrays(), loaded.get_arrays()
    assert any(k.startswith("rmsprop/") for k in saved)
    for name, array in saved.items():
        np.testing.assert_array_equal(restored[name], array, err_msg=name)
    venv.close()


@pytest.mark.slow
def test_cartpole_is_solved_with_the_shipped_entry(monitored_venv) -> None:
    """The issue's run: 8 envs, 500k steps; final model, deterministic evaluation over 10 episodes."""
    from algos.hyperparameters import shipped_entry
    from runner.play import play

    model = a2c.learn(env=monitored_venv("CartPole-v1", 8, seed=0), total_timesteps=500_000, seed=0,
                      **shipped_entry("a2c", env_id="CartPole-v1"))
    result = play(model, monitored_venv("CartPole-v1", 1, seed=1000), episodes=10, out=lambda s: None)
    assert float(np.mean(result.returns)) >= 475


def test_normalize_advantage_makes_the_policy_step_independent_of_the_advantages_scale() -> None:
    """With ``normalize_advantage`` the policy loss sees (A - mean) / std: scaling and shifting every advantage of
    a rollout leaves the policy loss unchanged (it does change without the setting)."""
    import gymnasium as gym

    from algos.a2c.model import A2CModel

    obs_space, act_space = gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(8, 3)).astype(np.float32)
    actions = rng.integers(0, 2, 8)
    values = rng.normal(size=8).astype(np.float32)
    advantages = rng.normal(size=8).astype(np.float32)

    def policy_loss(normalize: bool, scale: float, shift: float) -> float:
        model = A2CModel(obs_space, act_space, seed=0, normalize_advantage=normalize)
        returns = values + scale * advantages + shift
        return model.train(0.0, obs, actions, returns, values)["policy_loss"]

    assert policy_loss(True, 10.0, 3.0) == pytest.approx(policy_loss(True, 1.0, 0.0), rel=1e-4, abs=1e-6)
    assert policy_loss(False, 10.0, 3.0) != pytest.approx(policy_loss(False, 1.0, 0.0), rel=1e-2)

"""TRPO: the conjugate-gradient solver, the trust region of one step, learning an identity env, refusals."""
import numpy as np
import pytest
import tensorflow as tf
from gymnasium import spaces

from algos.trpo import trpo
from algos.trpo.model import KL_SLACK, TRPOModel
from common.errors import ConfigError
from common.nn.distributions import DiagGaussianPdType
from common.nn.tf_util import conjugate_gradient
from tests.test_ppo2 import mean_step_reward

pytestmark = pytest.mark.usefixtures("csv_log_dir")
OBS = spaces.Box(-3.0, 3.0, (4,), np.float32)


def test_conjugate_gradient_solves_a_known_spd_system() -> None:
    rng = np.random.default_rng(0)
    m = rng.normal(size=(6, 6))
    a = m @ m.T + 0.5 * np.eye(6)  # symmetric positive definite
    b = rng.normal(size=6)
    x = conjugate_gradient(lambda p: tf.linalg.matvec(tf.constant(a), p), tf.constant(b), iters=6).numpy()
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-6, atol=1e-8)
    two = conjugate_gradient(lambda p: tf.linalg.matvec(tf.constant(a), p), tf.constant(b), iters=2).numpy()
    assert not np.allclose(two, np.linalg.solve(a, b), atol=1e-3)  # the iteration cap holds


def _np_kl(pdtype, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """KL(p || q) per row, written out in numpy for the two distribution kinds tested."""
    if isinstance(pdtype, DiagGaussianPdType):  # params: [mean, logstd]
        d = pdtype.size
        m1, s1, m2, s2 = p[:, :d], p[:, d:], q[:, :d], q[:, d:]
        return np.sum(s2 - s1 + (np.exp(2 * s1) + (m1 - m2) ** 2) / (2 * np.exp(2 * s2)) - 0.5, axis=1)
    lp = p - np.log(np.exp(p).sum(1, keepdims=True))
    lq = q - np.log(np.exp(q).sum(1, keepdims=True))
    return np.sum(np.exp(lp) * (lp - lq), axis=1)


@pytest.mark.parametrize("action_space", [spaces.Discrete(3), spaces.Box(-1.0, 1.0, (2,), np.float32)])
def test_step_stays_in_the_trust_region_and_improves_the_surrogate(action_space) -> None:
    """After ``train``, the mean KL(old || new) measured here in numpy is within 1.5 * max_kl (and not
    trivially zero), and the surrogate (importance-weighted standardised advantage) went up from 0."""
    max_kl = 0.01
    model = TRPOModel(OBS, action_space, seed=0, network_kwargs={"num_hidden": 16}, max_kl=max_kl, cg_iters=10,
                      fvp_subsample=1)
    rng = np.random.default_rng(1)
    obs = rng.uniform(-3, 3, size=(256, 4)).astype(np.float32)
    pd = model.policy.pdtype
    old, _, _ = model.policy.step(obs)
    actions = pd.np_sample(old, rng)
    advs = rng.normal(size=256).astype(np.float32) + (actions.reshape(256, -1)[:, 0] > 0)  # some signal
    stats = model.train(obs, actions, advs, advs, np.zeros((0, 64), np.int32))
    new, _, _ = model.policy.step(obs)
    kl = float(np.mean(_np_kl(pd, old, new)))
    assert stats["step_fraction"] > 0
    assert 0.05 * max_kl < kl <= KL_SLACK * max_kl
    assert stats["kl"] == pytest.approx(kl, rel=1e-3, abs=1e-6)
    adv_n = (advs - advs.mean()) / (advs.std() + 1e-8)
    ratio = np.exp(pd.np_neglogp(old, actions) - pd.np_neglogp(new, actions))
    assert float(np.mean(ratio * adv_n)) > 1e-4  # 0 before the step
    assert stats["surrogate_after"] > stats["surrogate_before"]


def test_trpo_learns_the_identity_env(monitored_venv) -> None:
    venv = monitored_venv("IdentityDiscrete-v0", 4, seed=0)
    model = trpo.learn(env=venv, total_timesteps=2048, seed=0, timesteps_per_batch=256, max_kl=0.05, gamma=0.0,
                       log_interval=100)
    venv.close()
    assert model.num_timesteps == 2048
    # a random policy scores 0.25 per step (tests/test_ppo2.py checks that figure)
    assert mean_step_reward(model, monitored_venv("IdentityDiscrete-v0", 4, seed=123)) >= 0.95


def test_recurrent_networks_and_bad_settings_are_refused(monitored_venv) -> None:
    venv = monitored_venv("IdentityDiscrete-v0", 2)
    with pytest.raises(ConfigError, match="trpo does not support recurrent networks"):
        trpo.learn(env=venv, network="lstm", total_timesteps=0)
    with pytest.raises(ConfigError, match="max_kl must be greater than 0"):
        trpo.learn(env=venv, total_timesteps=0, max_kl=0.0)
    with pytest.raises(ConfigError, match="exceeds total_timesteps"):
        trpo.learn(env=venv, total_timesteps=100)
    venv.close()


def test_trpo_mpi_is_an_alias() -> None:
    import run_util

    assert run_util.check_algorithm_name("trpo_mpi") == "trpo"
    assert run_util.get_learn_function("trpo_mpi") is trpo.learn


@pytest.mark.slow
def test_cartpole_is_solved_with_the_shipped_entry(monitored_venv) -> None:
    """The issue's run: 100k steps, 1 env; final model, deterministic evaluation over 10 episodes (seeds
    0-4 of the runner command all gave 500, bench/README.md)."""
    from algos.hyperparameters import shipped_entry
    from runner.play import play

    model = trpo.learn(env=monitored_venv("CartPole-v1", 1, seed=0), total_timesteps=100_000, seed=0,
                       **shipped_entry("trpo", "classic_control", "CartPole-v1"))
    result = play(model, monitored_venv("CartPole-v1", 1, seed=1000), episodes=10, out=lambda s: None)
    assert float(np.mean(result.returns)) >= 475

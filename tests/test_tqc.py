"""tqc: the truncated-quantile target and the quantile Huber loss against hand computations, the model's
target from its own target critics, one-line errors for quantile settings; slow: Pendulum-v1 on 3 seeds."""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from gymnasium import spaces

from algos.hyperparameters import shipped_entry
from algos.tqc import tqc
from algos.tqc.model import TQCModel, quantile_huber_loss, truncated_target

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OBS, ACT = spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (2,), np.float32)


def test_truncated_target_matches_a_hand_computation():
    """Two critics of 3 quantiles, 1 dropped per critic: pooled and sorted [1, 2, 3, 4, 5, 9], the 2 largest
    dropped; r + gamma (1 - done) (q - alpha log pi) on what is kept."""
    next_quantiles = tf.constant([[[1.0, 5.0, 3.0], [2.0, 9.0, 4.0]],
                                  [[0.0, 0.0, 7.0], [8.0, 1.0, 6.0]]])
    target = truncated_target(next_quantiles, tf.constant([1.0, -1.0]), tf.constant([0.0, 1.0]),
                              tf.constant([-2.0, 3.0]), gamma=0.5, alpha=0.1, n_drop=2).numpy()
    # row 0: kept [1, 2, 3, 4]; 1 + 0.5 * (q + 0.2); row 1: terminated, the reward alone
    np.testing.assert_allclose(target, [[1.6, 2.1, 2.6, 3.1], [-1.0, -1.0, -1.0, -1.0]], rtol=1e-6)


def test_quantile_huber_loss_matches_a_hand_computation():
    """One critic of 2 quantiles (levels 0.25, 0.75) at [0, 2] against targets [3, 1]: the cells
    (delta, Huber, weight) are (3, 2.5, 0.25), (1, 0.5, 0.25), (1, 0.5, 0.75), (-1, 0.5, 0.25): mean 0.3125."""
    loss = quantile_huber_loss(tf.constant([[[0.0, 2.0]]]), tf.constant([[3.0, 1.0]])).numpy()
    assert loss == pytest.approx(0.3125)


def test_the_models_target_drops_the_largest_quantiles_of_its_target_critics():
    """The model's target from its target critics' outputs, sorted and cut in numpy."""
    model = TQCModel(OBS, ACT, network_kwargs={"num_hidden": 16}, seed=0, gamma=0.9, n_quantiles=5, n_critics=3,
                     top_quantiles_to_drop_per_net=2)
    rng = np.random.default_rng(0)
    o2 = tf.constant(rng.uniform(-1, 1, (8, 3)).astype(np.float32))
    r, d = tf.constant(rng.standard_normal(8).astype(np.float32)), tf.constant([0.0, 1.0] * 4)
    eps = tf.constant(rng.standard_normal((8, 2)).astype(np.float32))
    target = model._critic_target(r, o2, d, eps, tf.constant(0.5)).numpy()
    a2, logp2 = (t.numpy() for t in model._policy(o2, eps))
    pooled = np.concatenate([c(tf.concat([o2, a2], -1)).numpy() for c in model.target_critics], axis=1)
    kept = np.sort(pooled, axis=1)[:, :15 - 6]
    expected = r.numpy()[:, None] + 0.9 * (1 - d.numpy()[:, None]) * (kept - 0.5 * logp2[:, None])
    assert target.shape == (8, 9)
    np.testing.assert_allclose(target, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("flags, message", [
    (["--top_quantiles_to_drop_per_net=25"], "top_quantiles_to_drop_per_net must be in [0, n_quantiles - 1]"),
    (["--n_quantiles=0"], "n_quantiles"),
])
def test_bad_quantile_settings_are_one_line(flags, message):
    proc = subprocess.run([sys.executable, "-m", "run", "--alg=tqc", "--env=Pendulum-v1", "--num_timesteps=100",
                           *flags], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("run: error:") and message in lines[0], proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(1800)  # minutes per seed on a busy 2-core machine
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pendulum_reaches_minus_200_at_20k_with_the_shipped_entry(seed, monitored_venv):
    """rl-baselines3-zoo's TQC Pendulum budget: 20k steps, 10 deterministic episodes above -200 (a random
    policy scores about -1200)."""
    from runner.play import play

    env = monitored_venv("Pendulum-v1", 1)
    model = tqc.learn(env=env, total_timesteps=20_000, seed=seed,
                      **{**shipped_entry("tqc", "classic_control", "Pendulum-v1"), "log_interval": 10**9})
    eval_env = monitored_venv("Pendulum-v1", 1, seed=1000)
    result = play(model, eval_env, episodes=10, out=lambda s: None)
    assert np.mean(result.returns) >= -200.0, result.returns

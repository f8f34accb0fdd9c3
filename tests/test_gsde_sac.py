"""Generalized state-dependent exploration of sac and tqc (``--use_sde``, ``--sde_sample_freq``,
``--use_sde_at_warmup``, ``--log_std_init``): the squashed state-dependent Gaussian's log-probability, the
noise matrices of the blocks, model files, export and exact resumption."""
from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf
from gymnasium import spaces

import run
from algos.base import load_model
from algos.offpolicy.exploration import StateDependentExplorer
from algos.sac.model import SACModel
from tests.test_export import _assert_actions_equal, _export, _runner
from tests.test_resume import SETTINGS, N, _straight_killed_resumed

OBS = spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTIONS = spaces.Box(-2.0, 2.0, (2,), np.float32)


def _model() -> SACModel:
    model = SACModel(OBS, ACTIONS, network_kwargs={"num_layers": 1, "num_hidden": 4}, seed=0, use_sde=True,
                     log_std_init=-0.5)
    model.sde.log_std.assign(model.sde.log_std + np.random.default_rng(1).normal(0, 0.3, (4, 2)))
    model.actor.head.b.assign([3.0, -0.2])  # the first mean beyond +-2: clipped
    model.sync()
    return model


def test_the_squashed_log_probability_is_the_hand_computation():
    """Two observations and one noise matrix, worked out by hand: u = clip(mean, +-2) + z @ (sigma * eps),
    action tanh(u); the Gaussian of variance sum_j z_j^2 sigma_ji^2 (+1e-6) at u, minus log(1 - tanh(u)^2 + 1e-6);
    the features z learn through the log-probability (stable-baselines3's learn_features=True for SAC)."""
    model = _model()
    obs = np.array([[0.5, -0.2, 0.9], [-0.7, 0.1, 0.3]], np.float32)
    eps = np.random.default_rng(2).standard_normal((4, 2)).astype(np.float32)
    with tf.GradientTape() as tape:
        actions, logp = model._policy(tf.constant(obs), tf.constant(eps))
        total = tf.reduce_sum(logp)
    z = model.actor.latent(tf.constant(obs)).numpy().astype(np.float64)
    w, b = (v.numpy().astype(np.float64) for v in (model.actor.head.w, model.actor.head.b))
    sigma = np.exp(model.sde.log_std.numpy().astype(np.float64))
    theta = sigma * eps
    for n in range(2):
        want = 0.0
        for i in range(2):
            mean = min(max(sum(z[n, j] * w[j, i] for j in range(4)) + b[i], -2.0), 2.0)
            u = mean + sum(z[n, j] * theta[j, i] for j in range(4))
            var = sum(z[n, j] ** 2 * sigma[j, i] ** 2 for j in range(4)) + 1e-6
            want += -0.5 * (u - mean) ** 2 / var - 0.5 * math.log(2 * math.pi * var)
            want -= math.log(1.0 - math.tanh(u) ** 2 + 1e-6)
            assert actions.numpy()[n, i] == pytest.approx(math.tanh(u), abs=1e-6)
        assert logp.numpy()[n] == pytest.approx(want, rel=1e-4)
    grads = tape.gradient(total, model.actor_vars)
    assert all(g is not None for g in grads)  # the body's weights, the head and log_std
    assert model.actor_vars[-1] is model.sde.log_std


@pytest.mark.parametrize("sample_freq, draws", [(-1, 1), (3, 3)])
def test_the_explorer_draws_matrices_at_each_block_start_and_every_k_steps(sample_freq, draws):
    """Two blocks of 8 steps: each starts with new matrices (k=3: new ones before its steps 3 and 6, counted
    from 0); every action is tanh(clipped mean + z(s) @ the env's matrix in use), the deterministic one
    tanh(clipped mean)."""
    model = _model()
    explorer = StateDependentExplorer(model, np.random.default_rng(0), 2, sample_freq)
    x = np.random.default_rng(3).uniform(-1, 1, (2, 3)).astype(np.float32)
    mean, z = model.mean_latent(x)
    assert mean[:, 0].tolist() == [2.0, 2.0]
    np.testing.assert_allclose(model.act_unit(x), np.tanh(mean), rtol=1e-6)
    drawn = []
    for _ in range(2):
        explorer.start_block()
        drawn.append(explorer.matrices.matrices.copy())
        for _ in range(8):
            unit = explorer.actions(x)
            if not np.array_equal(explorer.matrices.matrices, drawn[-1]):
                drawn.append(explorer.matrices.matrices.copy())
            np.testing.assert_allclose(unit, np.tanh(mean + np.einsum("nl,nla->na", z, drawn[-1])), rtol=1e-5)
    assert len(drawn) == 2 * draws
    assert not np.array_equal(drawn[0][0], drawn[0][1])  # one matrix per env


@pytest.mark.parametrize("at_warmup", [False, True])
def test_a_run_draws_at_every_block_and_acts_with_gsde_at_warmup_when_asked(at_warmup, monkeypatch, tmp_path):
    """256 env steps in blocks of 32, all before learning_starts: matrices drawn 8 times; the gSDE policy acts
    in those steps only with --use_sde_at_warmup=True (else uniformly random actions)."""
    calls = {"start_block": 0, "actions": 0}
    for name in calls:
        original = getattr(StateDependentExplorer, name)

        def counted(self, *args, _name=name, _original=original):
            calls[_name] += 1
            return _original(self, *args)

        monkeypatch.setattr(StateDependentExplorer, name, counted)
    run.main(["--alg=sac", "--env=Pendulum-v1", "--num_timesteps=256", "--learning_starts=256", "--train_freq=32",
              "--use_sde=True", f"--use_sde_at_warmup={at_warmup}", "--num_hidden=8", "--seed=0", "--no_progress",
              f"--log_path={tmp_path / 'log'}", f"--save_path={tmp_path / 'model.zip'}"])
    assert calls == {"start_block": 8, "actions": 256 if at_warmup else 0}


@pytest.mark.parametrize("alg", ["sac", "tqc"])
def test_a_gsde_run_trains_saves_loads_and_exports_the_deterministic_action(alg, tmp_path):
    """A tiny run with --use_sde=True; its model file loads with the [latent, action] log_std and acts as the
    trained model did (tanh of the clipped mean); the exported policy gives the same action."""
    save = str(tmp_path / "model.zip")
    model = run.main([f"--alg={alg}", "--env=Pendulum-v1", "--num_timesteps=512", "--learning_starts=128",
                      "--train_freq=32", "--gradient_steps=4", "--batch_size=32", "--use_sde=True",
                      "--sde_sample_freq=4", "--log_std_init=-2", "--num_hidden=16", "--seed=0", "--no_progress",
                      f"--log_path={tmp_path / 'log'}", f"--save_path={save}"])
    loaded = load_model(save)
    assert loaded.use_sde and loaded.hyperparameters["sde_sample_freq"] == 4
    assert tuple(loaded.sde.log_std.shape) == (16, 1)
    assert not np.allclose(loaded.sde.log_std.numpy(), -2.0)  # trained
    for name, array in model.get_arrays().items():
        np.testing.assert_array_equal(loaded.get_arrays()[name], array, err_msg=name)
    obs = np.random.default_rng(0).uniform(-1, 1, (200, 3)).astype(np.float32)
    mean, _ = loaded.mean_latent(obs)
    want = loaded.scale_actions(np.tanh(mean))
    np.testing.assert_allclose(loaded.predict(obs)[0], want, rtol=1e-6)
    np.testing.assert_array_equal(loaded.predict(obs)[0], model.predict(obs)[0])
    assert not np.allclose(loaded.predict(obs, deterministic=False)[0], want)
    exported = _runner("tflite", _export(loaded, "tflite", tmp_path))({"obs": obs})
    _assert_actions_equal(exported["action"], want, loaded.action_space)


@pytest.mark.slow  # ~15 s: sac's gSDE resume contract runs with -m slow (CI)
def test_a_gsde_run_killed_and_resumed_ends_bit_identical(tmp_path, capsys):
    """The explorer's generator, noise matrices and steps since they were drawn are training state."""
    argv = ["--alg=sac", *SETTINGS["sac"], "--num_env=2", "--seed=3", f"--num_timesteps={2 * N}",
            f"--checkpoint_freq={N}", "--num_hidden=16", "--log_format=csv,log", "--no_progress",
            "--use_sde=True", "--sde_sample_freq=5", "--use_sde_at_warmup=True"]
    _straight_killed_resumed(argv, tmp_path, capsys)

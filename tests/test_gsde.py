"""Generalized state-dependent exploration (``--use_sde``, ``--sde_sample_freq``) of ppo2, a2c and trpo: the
state-dependent Gaussian's maths, the noise matrices of the rollout, deterministic acting, model files,
export and exact resumption."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf
from gymnasium import spaces

import run
from algos.base import load_model
from algos.on_policy.runner import Runner
from algos.ppo2.model import PPO2Model
from algos.training import EpisodeStats
from common.errors import UserError
from common.nn.policies import ActorCritic
from common.nn.sde import ExplorationMatrices
from tests.test_export import _assert_actions_equal, _export, _runner
from tests.test_resume import N, _straight_killed_resumed

OBS = spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTIONS = spaces.Box(-1.0, 1.0, (2,), np.float32)


def _policy(log_std_init: float = -0.5) -> ActorCritic:
    policy = ActorCritic(OBS, ACTIONS, "mlp", seed=0, log_std_init=log_std_init, use_sde=True, num_layers=1,
                         num_hidden=4)
    policy.logstd.assign(policy.logstd + np.random.default_rng(1).normal(0, 0.3, policy.logstd.shape))
    policy.sync()
    return policy


def test_log_probability_and_entropy_are_the_state_dependent_gaussians():
    """Two observations, worked out by hand: the variance of action i is sum_j z_j^2 sigma_ji^2 (+1e-6), z the
    policy's latent features; log-probability and entropy of that Gaussian, in TF and numpy alike."""
    policy = _policy()
    assert tuple(policy.logstd.shape) == (4, 2)  # [latent_dim, action_dim]
    obs = np.array([[0.5, -0.2, 0.9], [-0.7, 0.1, 0.3]], np.float32)
    actions = np.array([[0.3, -0.4], [-1.2, 0.8]], np.float32)
    z = policy.net(tf.constant(obs)).numpy().astype(np.float64)
    mean = policy.pi(tf.constant(z, tf.float32)).numpy().astype(np.float64)
    sigma = np.exp(policy.logstd.numpy().astype(np.float64))
    for n in range(2):
        logp = entropy = 0.0
        for i in range(2):
            var = sum(z[n, j] ** 2 * sigma[j, i] ** 2 for j in range(4)) + 1e-6
            logp += -0.5 * (actions[n, i] - mean[n, i]) ** 2 / var - 0.5 * math.log(2 * math.pi * var)
            entropy += 0.5 * math.log(2 * math.pi * math.e * var)
        neglogp, ent, _ = policy.evaluate(obs[n:n + 1], actions[n:n + 1])
        assert neglogp.numpy()[0] == pytest.approx(-logp, rel=1e-5)
        assert ent.numpy()[0] == pytest.approx(entropy, rel=1e-5)
        params = policy.step(obs[n:n + 1])[0]
        assert policy.pdtype.np_neglogp(params, actions[n:n + 1])[0] == pytest.approx(-logp, rel=1e-5)


def test_the_features_get_no_gradient_through_the_noise():
    """The entropy depends on the network only through the variance, whose features are cut off from the
    gradient: only ``logstd`` gets one."""
    policy = _policy()
    with tf.GradientTape() as tape:
        _, entropy, _ = policy.evaluate(np.ones((3, 3), np.float32), np.zeros((3, 2), np.float32))
        loss = tf.reduce_sum(entropy)
    grads = dict(zip([v.name for v in policy.trainable_variables],
                     tape.gradient(loss, policy.trainable_variables)))
    assert grads.pop("logstd:0") is not None
    assert all(g is None for g in grads.values())


def test_noise_matrices_are_drawn_every_k_steps_and_kept_between():
    noise = ExplorationMatrices(2, 4, 2, sample_freq=3)
    rng, std, latent = np.random.default_rng(0), np.full((4, 2), 0.5, np.float32), np.ones((2, 4), np.float32)
    noise.reset(std, rng)
    drawn = [noise.matrices.copy()]
    for _ in range(7):
        eps = noise.noise(latent, std, rng)
        np.testing.assert_allclose(eps, np.einsum("nl,nla->na", latent, noise.matrices), rtol=1e-6)
        if not np.array_equal(noise.matrices, drawn[-1]):
            drawn.append(noise.matrices.copy())
    assert len(drawn) == 3  # drawn at reset, then before the 4th and the 7th step
    assert not np.array_equal(drawn[0][0], drawn[0][1])  # one matrix per env


@pytest.mark.parametrize("sample_freq, draws", [(-1, 1), (4, 3)])
def test_the_rollout_draws_new_matrices_at_its_start_and_every_k_steps(monitored_venv, sample_freq, draws):
    """Two rollouts of 10 steps: each starts with new matrices (and, with k=4, new ones before its steps 4 and
    8, counted from 0); every action is the mean plus the latent features times the env's matrix in use."""
    model = PPO2Model(OBS, ACTIONS, network_kwargs={"num_hidden": 8}, seed=0, use_sde=True)
    env = monitored_venv("Pendulum-v1", 2, seed=0)
    runner = Runner(env, model.policy, env.reset(), 10, 0.99, 0.95, np.random.default_rng(0), EpisodeStats(),
                    sample_freq)
    sde, drawn, used = runner.sde, [], []
    reset, noise = sde.reset, sde.noise

    def counted_reset(std, rng):
        reset(std, rng)
        drawn.append(sde.matrices.copy())

    def recorded_noise(latent, std, rng):
        eps = noise(latent, std, rng)
        used.append(np.einsum("nl,nla->na", latent, sde.matrices))
        return eps

    sde.reset, sde.noise = counted_reset, recorded_noise
    for rollout in range(2):
        runner.run()
        assert len(drawn) == (rollout + 1) * draws
        st = runner.storage
        mean = np.stack([model.policy.step(st.obs[t])[0][:, :2] for t in range(10)])
        np.testing.assert_allclose(st.actions, mean + np.stack(used[-10:]), rtol=1e-5, atol=1e-6)
    assert all(not np.array_equal(a, b) for a, b in itertools.pairwise(drawn))


def test_deterministic_actions_are_the_mean(tmp_path):
    """predict(deterministic=True) and the exported policy act with the mean; sampled actions vary."""
    model = PPO2Model(OBS, ACTIONS, network_kwargs={"num_hidden": 8}, seed=0, use_sde=True, log_std_init=0.5)
    obs = np.random.default_rng(0).uniform(-1, 1, (200, 3)).astype(np.float32)
    mean = model.policy.forward(tf.constant(obs))[0].numpy()[:, :2]
    want = np.clip(mean, -1.0, 1.0)
    np.testing.assert_allclose(model.predict(obs, deterministic=True)[0], want, rtol=1e-6, atol=1e-6)
    assert not np.allclose(model.predict(obs, deterministic=False)[0], want)
    exported = _runner("tflite", _export(model, "tflite", tmp_path))({"obs": obs})
    _assert_actions_equal(exported["action"], model.predict(obs, deterministic=True)[0], ACTIONS)


def test_use_sde_with_discrete_actions_is_one_line():
    with pytest.raises(UserError, match=r"use_sde needs Box actions \(a Gaussian policy\), not Discrete\(2\)"):
        run.main(["--alg=ppo2", "--env=CartPole-v1", "--use_sde=True", "--num_timesteps=512", "--nsteps=64"])


@pytest.mark.parametrize("alg, budget", [("ppo2", "--nsteps=128"), ("a2c", "--nsteps=8"),
                                         ("trpo", "--timesteps_per_batch=256")])
def test_a_gsde_run_trains_saves_and_loads(alg, budget, tmp_path):
    """A tiny run with --use_sde=True --sde_sample_freq=4; its model file loads with the [latent, action]
    log_std and acts as the trained model did."""
    save = str(tmp_path / "model.zip")
    model = run.main([f"--alg={alg}", "--env=Pendulum-v1", "--num_env=2", "--num_timesteps=512", budget,
                      "--use_sde=True", "--sde_sample_freq=4", "--num_hidden=16", "--seed=0", "--no_progress",
                      f"--log_path={tmp_path / 'log'}", f"--save_path={save}"])
    loaded = load_model(save)
    assert loaded.hyperparameters["use_sde"] is True and loaded.hyperparameters["sde_sample_freq"] == 4
    assert tuple(loaded.policy.logstd.shape) == (16, 1)
    for name, array in model.get_arrays().items():
        np.testing.assert_array_equal(loaded.get_arrays()[name], array, err_msg=name)
    obs = np.random.default_rng(0).uniform(-1, 1, (20, 3)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(obs)[0], model.predict(obs)[0])


def test_a_gsde_run_killed_and_resumed_ends_bit_identical(tmp_path, capsys):
    """The noise matrices and the steps since they were drawn are part of the training state."""
    argv = ["--alg=ppo2", "--env=IdentityBox-v0", "--num_env=2", "--seed=3", f"--num_timesteps={2 * N}",
            f"--checkpoint_freq={N}", "--num_hidden=16", "--log_format=csv,log", "--no_progress", "--nsteps=64",
            "--use_sde=True", "--sde_sample_freq=5"]
    _straight_killed_resumed(argv, tmp_path, capsys)

"""Generalized state-dependent exploration (gSDE; Raffin et al. 2021) for Gaussian policies.

The action noise is ``z(s) @ theta``: ``z(s)`` the policy network's last latent features, ``theta`` a
[latent_dim, action_dim] matrix per env drawn from N(0, sigma^2), ``sigma = exp(log_std)`` a learned
[latent_dim, action_dim] parameter. Given ``s`` the action is Gaussian around the mean with variance
``sum_j z_j(s)^2 sigma_ji^2`` per action dimension, so a policy's distribution parameters stay
``[mean, logstd]`` per sample (``DiagGaussianPdType``) with ``sde_logstd`` as the log standard deviation.
The features enter the variance with their gradient stopped (stable-baselines3's learn_features=False),
except in the squashed form of the off-policy actors (sac, tqc: ``tf_squashed_sde_sample``), where they
learn through the variance and the noise (stable-baselines3's SAC, learn_features=True).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

EPSILON = 1e-6  # added to the variance before the square root, and to 1 - tanh(u)^2 (stable-baselines3's epsilon)
TANH_LIMIT = 1.0 - float(np.finfo(np.float32).eps)  # squashed actions are clipped to +-this before atanh


def tf_sde_logstd(latent: tf.Tensor, log_std: tf.Variable | tf.Tensor, learn_features: bool = False) -> tf.Tensor:
    """Log standard deviation [..., action_dim] of the state-dependent Gaussian of features ``latent``
    [..., latent_dim] (gradient stopped unless ``learn_features``) and the [latent_dim, action_dim] parameter
    ``log_std`` (TF)."""
    z = latent if learn_features else tf.stop_gradient(latent)
    variance = tf.tensordot(tf.square(z), tf.exp(2.0 * log_std), axes=1)
    return 0.5 * tf.math.log(variance + EPSILON)


def tf_squashed_sde_sample(mean: tf.Tensor, latent: tf.Tensor, log_std: tf.Variable | tf.Tensor,
                           eps: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Actions ``tanh(mean + latent @ theta)`` [B, action_dim] with one noise matrix for the batch,
    ``theta = exp(log_std) * eps`` (``eps`` [latent_dim, action_dim] standard normal), and their
    log-probabilities [B] under the squashed state-dependent Gaussian (TF; gradients reach ``mean``,
    ``latent`` and ``log_std``)."""
    actions = tf.tanh(mean + tf.matmul(latent, tf.exp(log_std) * eps))
    return actions, tf_squashed_sde_logp(actions, mean, latent, log_std)


def tf_squashed_sde_logp(actions: tf.Tensor, mean: tf.Tensor, latent: tf.Tensor,
                         log_std: tf.Variable | tf.Tensor) -> tf.Tensor:
    """Log-probabilities [B] of squashed actions in (-1, 1) under ``tanh`` of the state-dependent Gaussian
    around ``mean``: the Gaussian's density at ``u = atanh(action)`` (actions clipped to +-``TANH_LIMIT``)
    minus ``sum log(1 - tanh(u)^2 + EPSILON)``, as stable-baselines3's squashed gSDE distribution (TF)."""
    u = tf.atanh(tf.clip_by_value(actions, -TANH_LIMIT, TANH_LIMIT))
    logstd = tf_sde_logstd(latent, log_std, learn_features=True)
    gaussian = -0.5 * tf.square((u - mean) * tf.exp(-logstd)) - logstd - 0.5 * np.log(2.0 * np.pi)
    correction = tf.math.log(1.0 - tf.square(tf.tanh(u)) + EPSILON)
    return tf.reduce_sum(gaussian - correction, axis=-1)


def np_sde_logstd(latent: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    """``tf_sde_logstd`` in numpy."""
    return 0.5 * np.log(np.square(latent) @ np.exp(2.0 * log_std) + EPSILON)


class ExplorationMatrices:
    """The noise matrices ``theta`` of ``n_envs`` envs, [n_envs, latent_dim, action_dim]: drawn anew by
    ``reset`` (the runner calls it at the start of each rollout) and, with ``sample_freq`` k > 0, before
    every k-th ``noise`` call after it (k env steps); ``sample_freq`` <= 0: only by ``reset``. The
    matrices and the steps since they were drawn are training state (``state``/``load_state``)."""

    def __init__(self, n_envs: int, latent_dim: int, action_dim: int, sample_freq: int) -> None:
        self.sample_freq = int(sample_freq)
        self.matrices = np.zeros((int(n_envs), int(latent_dim), int(action_dim)), np.float32)
        self.steps = 0

    def reset(self, std: np.ndarray, rng: np.random.Generator) -> None:
        """New matrices with entries ~ N(0, ``std``^2) (``std`` [latent_dim, action_dim]) drawn with ``rng``."""
        eps = rng.standard_normal(self.matrices.shape, dtype=np.float32)
        np.multiply(eps, std, out=self.matrices)
        self.steps = 0

    def noise(self, latent: np.ndarray, std: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The action noise [n_envs, action_dim] of one env step, ``latent`` [n_envs, latent_dim] @ each env's
        matrix; new matrices first when ``sample_freq`` steps have passed since they were drawn."""
        if 0 < self.sample_freq <= self.steps:
            self.reset(std, rng)
        self.steps += 1
        return np.matmul(latent[:, None, :], self.matrices)[:, 0, :]

    def state(self) -> dict[str, Any]:
        """The matrices and the steps since they were drawn."""
        return {"matrices": self.matrices, "steps": self.steps}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state`` returned."""
        self.matrices[:] = state["matrices"]
        self.steps = int(state["steps"])

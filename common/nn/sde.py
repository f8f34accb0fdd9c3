"""Generalized state-dependent exploration (gSDE; Raffin et al. 2021) for Gaussian policies.

The action noise is ``z(s) @ theta``: ``z(s)`` the policy network's last latent features, ``theta`` a
[latent_dim, action_dim] matrix per env drawn from N(0, sigma^2), ``sigma = exp(log_std)`` a learned
[latent_dim, action_dim] parameter. Given ``s`` the action is Gaussian around the mean with variance
``sum_j z_j(s)^2 sigma_ji^2`` per action dimension, so a policy's distribution parameters stay
``[mean, logstd]`` per sample (``DiagGaussianPdType``) with ``sde_logstd`` as the log standard deviation.
The features enter the variance with their gradient stopped (stable-baselines3's learn_features=False).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

EPSILON = 1e-6  # added to the variance before the square root (stable-baselines3's epsilon)


def tf_sde_logstd(latent: tf.Tensor, log_std: tf.Variable | tf.Tensor) -> tf.Tensor:
    """Log standard deviation [..., action_dim] of the state-dependent Gaussian of features ``latent``
    [..., latent_dim] (gradient stopped) and the [latent_dim, action_dim] parameter ``log_std`` (TF)."""
    variance = tf.tensordot(tf.square(tf.stop_gradient(latent)), tf.exp(2.0 * log_std), axes=1)
    return 0.5 * tf.math.log(variance + EPSILON)


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

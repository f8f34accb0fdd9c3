"""Distributional Q heads: C51's categorical distribution (Bellemare et al. 2017) and QR-DQN's quantiles
(Dabney et al. 2018). Each turns the head's outputs per action ``[B, A, K]`` into expected Q-values (TF and
numpy), builds the target of a sampled batch from the next state's outputs for the chosen action, and gives
the loss per transition (also the priority of prioritized replay).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from algos import hyperparameters
from common.errors import ConfigError

KINDS = ("c51", "qr")


class Categorical:
    """C51: ``num_atoms`` probabilities (softmax of the outputs) on a fixed support from ``v_min`` to ``v_max``.

    The target distribution is the next one shifted by the return, ``r + discount * z``, clipped to the support
    and projected onto it: atom ``j`` gets ``sum_i p_i * max(0, 1 - |clip(Tz_i) - z_j| / dz)`` (the mass of
    each shifted atom split between its two neighbours in proportion to the distance). The loss is the cross
    entropy of the online distribution of the taken action from that target.
    """

    def __init__(self, num_atoms: int, v_min: float, v_max: float):
        if num_atoms < 2 or not v_max > v_min:
            raise ConfigError(f"deepq: C51 needs num_atoms >= 2 and v_max > v_min, got num_atoms={num_atoms}, "
                              f"v_min={v_min}, v_max={v_max}")
        self.num_outputs, self.v_min, self.v_max = int(num_atoms), float(v_min), float(v_max)
        self.support = np.linspace(self.v_min, self.v_max, self.num_outputs).astype(np.float32)
        self.delta = (self.v_max - self.v_min) / (self.num_outputs - 1)

    def expected_tf(self, logits: tf.Tensor) -> tf.Tensor:
        """Expected values ``[..., A]`` of the outputs ``[..., A, K]``."""
        return tf.reduce_sum(tf.nn.softmax(logits, axis=-1) * self.support, axis=-1)

    def expected(self, logits: np.ndarray) -> np.ndarray:
        """``expected_tf`` in numpy."""
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True) * self.support).sum(axis=-1)

    def target(self, next_logits: tf.Tensor, rewards: tf.Tensor, discounts: tf.Tensor) -> tf.Tensor:
        """The projected target probabilities ``[B, K]`` from the next state's outputs ``[B, K]`` for the chosen
        action; ``discounts`` [B] is 0 where the episode terminated."""
        return self.project(tf.nn.softmax(next_logits, axis=-1), rewards, discounts)

    def project(self, probs: tf.Tensor, rewards: tf.Tensor, discounts: tf.Tensor) -> tf.Tensor:
        """Probabilities ``probs`` [B, K] on ``r + discounts * z``, projected onto the support ``z``."""
        return _project(probs, rewards, discounts, tf.constant(self.support),
                        *(tf.constant(v, tf.float32) for v in (self.v_min, self.v_max, self.delta)))

    def loss(self, logits: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
        """Cross entropy ``-sum_j m_j log p_j`` per transition [B] of the taken action's outputs [B, K]."""
        return -tf.reduce_sum(target * tf.nn.log_softmax(logits, axis=-1), axis=-1)


@tf.function(jit_compile=True, reduce_retracing=True)
def _project(probs, rewards, discounts, z, v_min, v_max, delta):
    """``Categorical.project`` in one XLA call: the weights of the [B, K, K] (shifted atom, atom) pairs are fused
    into the sum (unfused, they are six [B, K, K] tensors)."""
    tz = tf.clip_by_value(rewards[:, None] + discounts[:, None] * z[None, :], v_min, v_max)
    weight = tf.maximum(0.0, 1.0 - tf.abs(tz[:, :, None] - z[None, None, :]) / delta)  # [B, i, j]
    return tf.reduce_sum(probs[:, :, None] * weight, axis=1)


class Quantile:
    """QR-DQN: ``num_quantiles`` values at the quantile midpoints ``tau_i = (2i + 1) / (2N)``.

    The target quantiles are ``r + discount * theta'_j``; the loss per transition is the quantile Huber loss
    (kappa = 1) summed over the online quantiles and averaged over the target ones, as stable-baselines3
    (sb3-contrib's ``quantile_huber_loss``): ``sum_i mean_j |tau_i - 1{u_ij < 0}| huber(u_ij)`` with
    ``u_ij = target_j - theta_i``.
    """

    def __init__(self, num_quantiles: int):
        if num_quantiles < 1:
            raise ConfigError(f"deepq: QR-DQN needs num_quantiles >= 1, got {num_quantiles}")
        self.num_outputs = int(num_quantiles)
        self.taus = ((2 * np.arange(self.num_outputs) + 1) / (2.0 * self.num_outputs)).astype(np.float32)

    def expected_tf(self, quantiles: tf.Tensor) -> tf.Tensor:
        """Expected values ``[..., A]``: the mean of the quantiles ``[..., A, K]``."""
        return tf.reduce_mean(quantiles, axis=-1)

    def expected(self, quantiles: np.ndarray) -> np.ndarray:
        """``expected_tf`` in numpy."""
        return quantiles.mean(axis=-1)

    def target(self, next_quantiles: tf.Tensor, rewards: tf.Tensor, discounts: tf.Tensor) -> tf.Tensor:
        """Target quantiles ``[B, K]``: ``r + discounts * theta'``; ``discounts`` [B] is 0 at terminations."""
        return rewards[:, None] + discounts[:, None] * next_quantiles

    def loss(self, quantiles: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
        """The quantile Huber loss per transition [B] of the taken action's quantiles [B, K]."""
        return _quantile_huber_loss(quantiles, target, tf.constant(self.taus))


def _pairs(quantiles: tf.Tensor, target: tf.Tensor, taus: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The pairwise differences ``u_ij = target_j - theta_i`` [B, i (online), j (target)] and the quantile
    weights ``|tau_i - 1{u_ij < 0}|``."""
    u = target[:, None, :] - quantiles[:, :, None]
    return u, tf.abs(taus[None, :, None] - tf.cast(u < 0.0, u.dtype))


def _slope(u: tf.Tensor, weight: tf.Tensor) -> tf.Tensor:
    """d/du of each pair's term ``weight * huber(u) / K``: the Huber loss's slope is ``clip(u, -1, 1)``."""
    return weight * tf.clip_by_value(u, -1.0, 1.0) / tf.cast(tf.shape(u)[2], u.dtype)


@tf.function(jit_compile=True, reduce_retracing=True)
def _loss_and_quantile_grad(quantiles, target, taus):
    """The loss [B] and its gradient by the quantiles [B, K], fused by XLA into passes over the [B, K, K] pairs
    (unfused, the loss and its autodiff gradient are two dozen [B, K, K] tensors)."""
    u, weight = _pairs(quantiles, target, taus)
    a = tf.abs(u)
    huber = tf.where(a > 1.0, a - 0.5, 0.5 * tf.square(u))
    return tf.reduce_sum(tf.reduce_mean(weight * huber, axis=2), axis=1), -tf.reduce_sum(_slope(u, weight), axis=2)


@tf.function(jit_compile=True, reduce_retracing=True)
def _target_grad(quantiles, target, taus):
    """The loss's gradient by the target [B, K] (a graph that does not use it leaves it out)."""
    u, weight = _pairs(quantiles, target, taus)
    return tf.reduce_sum(_slope(u, weight), axis=1)


@tf.custom_gradient
def _quantile_huber_loss(quantiles: tf.Tensor, target: tf.Tensor, taus: tf.Tensor):
    """``sum_i mean_j |tau_i - 1{u_ij < 0}| huber(u_ij)`` per transition [B], ``u_ij = target_j - quantiles_i``
    (kappa = 1), with its gradient computed alongside in one XLA call."""
    loss, quantile_grad = _loss_and_quantile_grad(quantiles, target, taus)

    def grad(upstream: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, None]:
        return upstream[:, None] * quantile_grad, upstream[:, None] * _target_grad(quantiles, target, taus), None

    return loss, grad


def make(kind: str | None, num_atoms: int, v_min: float, v_max: float,
         num_quantiles: int) -> Categorical | Quantile | None:
    """The head of ``distributional`` = ``kind``: None (expected values only), "c51" or "qr"; sizes outside
    hyperparams/deepq.toml's [ranges] (such as a model file's) are a ConfigError."""
    if kind is None:
        return None
    if kind == "c51":
        return Categorical(hyperparameters.table("deepq").check("num_atoms", num_atoms), v_min, v_max)
    if kind == "qr":
        return Quantile(hyperparameters.table("deepq").check("num_quantiles", num_quantiles))
    raise ConfigError(f"deepq: distributional must be one of {', '.join(KINDS)} (or none), got {kind!r}")

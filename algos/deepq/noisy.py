"""Factorised Gaussian noisy linear layers (Fortunato et al. 2018), in TensorFlow and numpy.

``y = x @ (w + w_sigma * outer(f(e_in), f(e_out))) + b + b_sigma * f(e_out)`` with ``f(e) = sign(e) sqrt|e|``
and ``e_in``, ``e_out`` standard normal vectors given by the caller; without noise the layer is its mean
``x @ w + b`` (the greedy policy of evaluation, ``--play`` and export). ``w`` and ``b`` start uniform in
``+-1/sqrt(in)``, the sigmas at ``sigma0 / sqrt(in)``.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf


def scale_noise_tf(e: tf.Tensor) -> tf.Tensor:
    """``sign(e) * sqrt(|e|)``."""
    return tf.sign(e) * tf.sqrt(tf.abs(e))


def scale_noise(e: np.ndarray) -> np.ndarray:
    """``sign(e) * sqrt(|e|)`` in numpy."""
    return np.sign(e) * np.sqrt(np.abs(e))


class NoisyDense(tf.Module):
    """A dense layer with learnt factorised Gaussian noise on its weights and biases."""

    def __init__(self, in_dim: int, out_dim: int, sigma0: float, rng: np.random.Generator, name: str | None = None):
        super().__init__(name=name)
        bound = 1.0 / np.sqrt(in_dim)
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.w = tf.Variable(rng.uniform(-bound, bound, (in_dim, out_dim)).astype(np.float32), name="w")
        self.b = tf.Variable(rng.uniform(-bound, bound, out_dim).astype(np.float32), name="b")
        self.w_sigma = tf.Variable(np.full((in_dim, out_dim), sigma0 * bound, np.float32), name="w_sigma")
        self.b_sigma = tf.Variable(np.full(out_dim, sigma0 * bound, np.float32), name="b_sigma")

    def __call__(self, x, noise=None):
        """The layer on ``x``; ``noise`` = (e_in [in], e_out [out]) or None (the mean layer)."""
        if x.dtype != self.w.dtype:
            x = tf.cast(x, self.w.dtype)
        y = tf.matmul(x, self.w) + self.b
        if noise is None:
            return y
        f_in, f_out = scale_noise_tf(noise[0]), scale_noise_tf(noise[1])
        return y + tf.matmul(x * f_in, self.w_sigma) * f_out + self.b_sigma * f_out

    def sigmas(self) -> tuple[np.ndarray, np.ndarray]:
        """(w_sigma, b_sigma) as numpy arrays."""
        return self.w_sigma.numpy(), self.b_sigma.numpy()


def noisy_weights(w: np.ndarray, b: np.ndarray, sigmas: tuple[np.ndarray, np.ndarray],
                  noise: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The weights and biases a ``NoisyDense`` of means ``w``, ``b`` acts with under ``noise`` (numpy)."""
    f_in, f_out = scale_noise(noise[0]), scale_noise(noise[1])
    return w + sigmas[0] * np.outer(f_in, f_out), b + sigmas[1] * f_out

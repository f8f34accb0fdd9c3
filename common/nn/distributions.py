"""Action distributions: one class per action-space kind, each with a TF side (training) and a
numpy side (acting without a TF call).

A distribution is described by a flat float32 parameter vector per sample (``param_size`` numbers):
logits for Discrete / MultiDiscrete / MultiBinary, ``[mean, logstd]`` for Box.
``make_pdtype(action_space)`` picks the class.
"""
from __future__ import annotations

import math

import numpy as np
import tensorflow as tf
from gymnasium import spaces

from common.wrappers.action_mask import MASKED_LOGIT

_LOG_2PI = math.log(2.0 * math.pi)


def _einsum_vecdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...i->...", a, b)


_vecdot = getattr(np, "vecdot", _einsum_vecdot)  # numpy >= 2.0 has the faster np.vecdot


def _np_logsumexp(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[..., 0]


class PdType:
    """Base class. Subclasses define the parameter layout and the maths."""

    param_size: int
    action_shape: tuple[int, ...]
    action_dtype: np.dtype

    # ---- TF (training) ----
    def tf_neglogp(self, params: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        """Negative log-likelihood of ``actions`` (one number per sample)."""
        raise NotImplementedError

    def tf_entropy(self, params: tf.Tensor) -> tf.Tensor:
        """Entropy per sample."""
        raise NotImplementedError

    def tf_mode(self, params: tf.Tensor) -> tf.Tensor:
        """Most likely action per sample."""
        raise NotImplementedError

    def tf_kl(self, params: tf.Tensor, other: tf.Tensor) -> tf.Tensor:
        """KL(this || other) per sample, between the distributions with ``params`` and ``other``."""
        raise NotImplementedError

    def tf_probs(self, params: tf.Tensor) -> tf.Tensor | None:
        """Action probabilities per sample (concatenated over components), None for densities."""
        return None

    # ---- numpy (acting) ----
    def np_sample(self, params: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Sample one action per row of ``params`` with ``rng``."""
        raise NotImplementedError

    def np_mode(self, params: np.ndarray) -> np.ndarray:
        """Most likely action per row."""
        raise NotImplementedError

    def np_neglogp(self, params: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Negative log-likelihood of ``actions`` (float32, one per row)."""
        raise NotImplementedError

    def np_sample_neglogp(self, params: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """A sample per row (the same draws as ``np_sample``) and its negative log-likelihood."""
        actions = self.np_sample(params, rng)
        return actions, self.np_neglogp(params, actions)

    def np_act(self, params: np.ndarray, rng: np.random.Generator | None, deterministic: bool) -> np.ndarray:
        """Mode when ``deterministic`` else a sample."""
        if deterministic or rng is None:
            return self.np_mode(params)
        return self.np_sample(params, rng)


class CategoricalPdType(PdType):
    """Discrete(n): logits."""

    def __init__(self, n: int):
        self.n = int(n)
        self.param_size = self.n
        self.action_shape = ()
        self.action_dtype = np.dtype(np.int64)

    def tf_neglogp(self, params: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(actions, tf.int32), logits=params)

    def tf_entropy(self, params: tf.Tensor) -> tf.Tensor:
        a0 = params - tf.reduce_max(params, axis=-1, keepdims=True)
        ea0 = tf.exp(a0)
        z0 = tf.reduce_sum(ea0, axis=-1, keepdims=True)
        p0 = ea0 / z0
        return tf.reduce_sum(p0 * (tf.math.log(z0) - a0), axis=-1)

    def tf_mode(self, params: tf.Tensor) -> tf.Tensor:
        return tf.argmax(params, axis=-1)

    def tf_kl(self, params: tf.Tensor, other: tf.Tensor) -> tf.Tensor:
        logp, logq = tf.nn.log_softmax(params, axis=-1), tf.nn.log_softmax(other, axis=-1)
        return tf.reduce_sum(tf.exp(logp) * (logp - logq), axis=-1)

    def tf_probs(self, params: tf.Tensor) -> tf.Tensor:
        return tf.nn.softmax(params, axis=-1)

    def np_sample(self, params: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        u = rng.random(params.shape)
        return np.argmax(params - np.log(-np.log(u + 1e-20) + 1e-20), axis=-1)

    def np_mode(self, params: np.ndarray) -> np.ndarray:
        return np.argmax(params, axis=-1)

    def np_neglogp(self, params: np.ndarray, actions: np.ndarray) -> np.ndarray:
        actions = np.asarray(actions, np.int64)
        if params.ndim == 2:  # the rollout's case: the same numbers as below in 2/3 of the time
            m = params.max(axis=-1)
            return (m + np.log(np.exp(params - m[:, None]).sum(axis=-1)) - params[np.arange(len(actions)), actions]
                    ).astype(np.float32)
        picked = np.take_along_axis(params, actions[..., None], axis=-1)[..., 0]
        return (_np_logsumexp(params) - picked).astype(np.float32)


class MultiCategoricalPdType(PdType):
    """MultiDiscrete(nvec): concatenated logits, one categorical per component."""

    def __init__(self, nvec):
        self.nvec = [int(n) for n in np.asarray(nvec).ravel()]
        self.param_size = int(sum(self.nvec))
        self.action_shape = (len(self.nvec),)
        self.action_dtype = np.dtype(np.int64)
        self._cats = [CategoricalPdType(n) for n in self.nvec]
        self._splits = np.cumsum(self.nvec)[:-1]

    def _tf_split(self, params):
        return tf.split(params, self.nvec, axis=-1)

    def tf_neglogp(self, params: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        acts = tf.unstack(tf.cast(actions, tf.int32), axis=-1)
        return tf.add_n([c.tf_neglogp(p, a) for c, p, a in zip(self._cats, self._tf_split(params), acts)])

    def tf_entropy(self, params: tf.Tensor) -> tf.Tensor:
        return tf.add_n([c.tf_entropy(p) for c, p in zip(self._cats, self._tf_split(params))])

    def tf_mode(self, params: tf.Tensor) -> tf.Tensor:
        return tf.stack([c.tf_mode(p) for c, p in zip(self._cats, self._tf_split(params))], axis=-1)

    def tf_kl(self, params: tf.Tensor, other: tf.Tensor) -> tf.Tensor:
        return tf.add_n([c.tf_kl(p, q) for c, p, q in zip(self._cats, self._tf_split(params), self._tf_split(other))])

    def tf_probs(self, params: tf.Tensor) -> tf.Tensor:
        return tf.concat([c.tf_probs(p) for c, p in zip(self._cats, self._tf_split(params))], axis=-1)

    def np_sample(self, params: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        parts = np.split(params, self._splits, axis=-1)
        return np.stack([c.np_sample(p, rng) for c, p in zip(self._cats, parts)], axis=-1)

    def np_mode(self, params: np.ndarray) -> np.ndarray:
        parts = np.split(params, self._splits, axis=-1)
        return np.stack([c.np_mode(p) for c, p in zip(self._cats, parts)], axis=-1)

    def np_neglogp(self, params: np.ndarray, actions: np.ndarray) -> np.ndarray:
        parts = np.split(params, self._splits, axis=-1)
        actions = np.asarray(actions)
        return sum(c.np_neglogp(p, actions[..., i]) for i, (c, p) in enumerate(zip(self._cats, parts))).astype(
            np.float32
        )


class DiagGaussianPdType(PdType):
    """Box(shape=(d,) or any shape, flattened): params are ``[mean (d), logstd (d)]``."""

    def __init__(self, shape):
        self.shape = tuple(int(s) for s in shape)
        self.size = int(np.prod(self.shape))
        self.param_size = 2 * self.size
        self.action_shape = self.shape
        self.action_dtype = np.dtype(np.float32)

    def _split(self, params):
        return params[..., : self.size], params[..., self.size :]

    def tf_neglogp(self, params: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        mean, logstd = self._split(params)
        x = tf.reshape(tf.cast(actions, tf.float32), tf.shape(mean))
        return (
            0.5 * tf.reduce_sum(tf.square((x - mean) / tf.exp(logstd)), axis=-1)
            + 0.5 * _LOG_2PI * self.size
            + tf.reduce_sum(logstd, axis=-1)
        )

    def tf_entropy(self, params: tf.Tensor) -> tf.Tensor:
        _, logstd = self._split(params)
        return tf.reduce_sum(logstd + 0.5 * (_LOG_2PI + 1.0), axis=-1)

    def tf_mode(self, params: tf.Tensor) -> tf.Tensor:
        mean, _ = self._split(params)
        return tf.reshape(mean, tf.concat([tf.shape(mean)[:-1], self.shape], axis=0))

    def tf_kl(self, params: tf.Tensor, other: tf.Tensor) -> tf.Tensor:
        (m1, s1), (m2, s2) = self._split(params), self._split(other)
        return tf.reduce_sum(s2 - s1 + (tf.exp(2.0 * s1) + tf.square(m1 - m2)) / (2.0 * tf.exp(2.0 * s2)) - 0.5,
                             axis=-1)

    def _sample_and_noise(self, params, rng):
        """A sample per row, the standard normal noise it was drawn with, and the rows' logstd."""
        mean, logstd = self._split(params)
        eps = rng.standard_normal(mean.shape, dtype=np.float32)
        x = (mean + np.exp(logstd) * eps).astype(np.float32, copy=False).reshape(mean.shape[:-1] + self.shape)
        return x, eps, logstd

    def np_sample(self, params: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self._sample_and_noise(params, rng)[0]

    def np_sample_neglogp(self, params: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The sample's standardised noise gives its neglogp directly: 0.5 |eps|^2 + 0.5 d log(2 pi) + sum(logstd)."""
        x, eps, logstd = self._sample_and_noise(params, rng)
        neglogp = 0.5 * _vecdot(eps, eps) + (np.add.reduce(logstd, axis=-1) + 0.5 * _LOG_2PI * self.size)
        return x, neglogp.astype(np.float32, copy=False)

    def np_mode(self, params: np.ndarray) -> np.ndarray:
        mean, _ = self._split(params)
        return mean.reshape(mean.shape[:-1] + self.shape).astype(np.float32)

    def np_neglogp(self, params: np.ndarray, actions: np.ndarray) -> np.ndarray:
        mean, logstd = self._split(params)
        x = np.asarray(actions, np.float32).reshape(mean.shape)
        out = 0.5 * np.sum(np.square((x - mean) / np.exp(logstd)), axis=-1) + 0.5 * _LOG_2PI * self.size
        return (out + np.sum(logstd, axis=-1)).astype(np.float32)


class BernoulliPdType(PdType):
    """MultiBinary(n): one logit per bit."""

    def __init__(self, n):
        self.shape = tuple(np.atleast_1d(n).astype(int).tolist())
        self.size = int(np.prod(self.shape))
        self.param_size = self.size
        self.action_shape = self.shape
        self.action_dtype = np.dtype(np.int8)

    def tf_neglogp(self, params: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        x = tf.reshape(tf.cast(actions, tf.float32), tf.shape(params))
        return tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=x, logits=params), axis=-1)

    def tf_entropy(self, params: tf.Tensor) -> tf.Tensor:
        p = tf.sigmoid(params)
        return tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=p, logits=params), axis=-1)

    def tf_mode(self, params: tf.Tensor) -> tf.Tensor:
        return tf.cast(params > 0, tf.int8)

    def tf_kl(self, params: tf.Tensor, other: tf.Tensor) -> tf.Tensor:
        p, lp, lq = tf.sigmoid(params), tf.math.log_sigmoid(params), tf.math.log_sigmoid(other)
        lp0, lq0 = tf.math.log_sigmoid(-params), tf.math.log_sigmoid(-other)
        return tf.reduce_sum(p * (lp - lq) + (1.0 - p) * (lp0 - lq0), axis=-1)

    def tf_probs(self, params: tf.Tensor) -> tf.Tensor:
        return tf.sigmoid(params)

    def np_sample(self, params: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(-params))
        out = (rng.random(params.shape) < p).astype(np.int8)
        return out.reshape(params.shape[:-1] + self.shape)

    def np_mode(self, params: np.ndarray) -> np.ndarray:
        return (params > 0).astype(np.int8).reshape(params.shape[:-1] + self.shape)

    def np_neglogp(self, params: np.ndarray, actions: np.ndarray) -> np.ndarray:
        x = np.asarray(actions, np.float32).reshape(params.shape)
        # sigmoid cross-entropy, numerically stable form
        ce = np.maximum(params, 0) - params * x + np.log1p(np.exp(-np.abs(params)))
        return ce.sum(axis=-1).astype(np.float32)


def make_pdtype(action_space: spaces.Space) -> PdType:
    """The distribution type for an action space (Discrete, Box, MultiDiscrete, MultiBinary)."""
    if isinstance(action_space, spaces.Discrete):
        return CategoricalPdType(action_space.n)
    if isinstance(action_space, spaces.Box):
        return DiagGaussianPdType(action_space.shape)
    if isinstance(action_space, spaces.MultiDiscrete):
        return MultiCategoricalPdType(action_space.nvec)
    if isinstance(action_space, spaces.MultiBinary):
        return BernoulliPdType(action_space.n)
    raise TypeError(
        f"unsupported action space {action_space}; use Discrete, Box, MultiDiscrete or MultiBinary"
    )


def tf_masked_logits(params: tf.Tensor, masks: tf.Tensor | None) -> tf.Tensor:
    """Logits with the entries that ``masks`` (bool, same shape) marks False set to ``MASKED_LOGIT``; ``params``
    itself when ``masks`` is None."""
    if masks is None:
        return params
    return tf.where(tf.cast(masks, tf.bool), params, tf.constant(MASKED_LOGIT, params.dtype))


def to_env_actions(actions: np.ndarray, action_space: spaces.Space) -> np.ndarray:
    """Actions as the env expects them: Box actions clipped to the bounds, Discrete offset by ``start``."""
    if isinstance(action_space, spaces.Box):
        return np.minimum(np.maximum(actions, action_space.low), action_space.high)  # np.clip, minus its overhead
    if isinstance(action_space, spaces.Discrete) and int(action_space.start) != 0:
        return actions + int(action_space.start)
    if isinstance(action_space, spaces.MultiDiscrete) and np.any(action_space.start != 0):
        return actions + action_space.start
    return actions


def tf_to_env_actions(actions: tf.Tensor, action_space: spaces.Space) -> tf.Tensor:
    """``to_env_actions`` in TF (for exported policies)."""
    if isinstance(action_space, spaces.Box):
        low = np.broadcast_to(action_space.low, action_space.shape)
        high = np.broadcast_to(action_space.high, action_space.shape)
        actions = tf.cast(actions, tf.float32)
        return tf.clip_by_value(actions, low.astype(np.float32), high.astype(np.float32))
    if isinstance(action_space, spaces.Discrete) and int(action_space.start) != 0:
        return actions + int(action_space.start)
    if isinstance(action_space, spaces.MultiDiscrete) and np.any(action_space.start != 0):
        return actions + tf.constant(action_space.start, actions.dtype)
    return actions

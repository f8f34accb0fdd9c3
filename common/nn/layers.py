"""Building blocks of the networks: orthogonal initialisation, activations (TF and numpy), dense and
convolution layers from raw tf.Variables, layer normalisation and stacks of dense layers (TF and numpy)."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from common.errors import ConfigError
from common.nn.numpy_layers import NUMPY_ACTIVATIONS, np_layer_norm, numpy_dense_stack  # noqa: F401 - re-exported

SQRT2 = float(np.sqrt(2.0))


def ortho_init(shape: Sequence[int], gain: float = 1.0, rng: np.random.Generator | None = None) -> np.ndarray:
    """Orthogonal initialisation as in baselines (last axis = outputs), float32."""
    shape = tuple(int(s) for s in shape)
    flat = (int(np.prod(shape[:-1])), shape[-1])
    a = rng.standard_normal(flat) if rng is not None else np.random.normal(0.0, 1.0, flat)
    u, _, v = np.linalg.svd(a, full_matrices=False)
    q = u if u.shape == flat else v
    return (gain * q.reshape(shape)).astype(np.float32)


def uniform_init(shape: Sequence[int], fan_in: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """PyTorch's default for a linear layer's weights and biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), float32."""
    bound = 1.0 / np.sqrt(fan_in)
    shape = tuple(int(s) for s in shape)
    values = rng.uniform(-bound, bound, shape) if rng is not None else np.random.uniform(-bound, bound, shape)
    return values.astype(np.float32)


ACTIVATIONS: dict[str, tuple[Callable, Callable]] = {
    "tanh": (tf.tanh, NUMPY_ACTIVATIONS["tanh"]),
    "relu": (tf.nn.relu, NUMPY_ACTIVATIONS["relu"]),
    "elu": (tf.nn.elu, NUMPY_ACTIVATIONS["elu"]),
    "sigmoid": (tf.sigmoid, NUMPY_ACTIVATIONS["sigmoid"]),
    "identity": (tf.identity, NUMPY_ACTIVATIONS["identity"]),
}


def activation_fns(name: str | Callable) -> tuple[Callable, Callable | None]:
    """(TF function, numpy function) of a named activation; a callable is the TF function, with no numpy one."""
    if callable(name):
        return name, None
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ConfigError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}") from None


class Dense(tf.Module):
    """``x @ w + b``: orthogonal ``w`` (scaled by ``gain``) and zero ``b``, or with ``orthogonal=False``
    both drawn as PyTorch draws them (``uniform_init``; ``gain`` unused)."""

    def __init__(self, in_dim: int, out_dim: int, gain: float = SQRT2, rng=None, name: str | None = None,
                 orthogonal: bool = True):
        super().__init__(name=name)
        if orthogonal:
            w, b = ortho_init((in_dim, out_dim), gain, rng), np.zeros(out_dim, np.float32)
        else:
            w = uniform_init((in_dim, out_dim), in_dim, rng)
            b = uniform_init((out_dim,), in_dim, rng)
        self.w = tf.Variable(w, name="w")
        self.b = tf.Variable(b, name="b")

    def __call__(self, x):
        """``x @ w + b`` in ``x``'s dtype (the float32 weights are cast to it: bfloat16 compute)."""
        if x.dtype != self.w.dtype:
            return tf.matmul(x, tf.cast(self.w, x.dtype)) + tf.cast(self.b, x.dtype)
        return tf.matmul(x, self.w) + self.b


def tf_layer_norm(x: tf.Tensor, g: tf.Tensor, b: tf.Tensor, eps: float = 1e-5) -> tf.Tensor:
    """Layer normalisation over the last axis, with gain ``g`` and offset ``b``, computed in float32 and
    returned in ``x``'s dtype."""
    h = tf.cast(x, tf.float32)
    mean, var = tf.nn.moments(h, axes=[-1], keepdims=True)
    return tf.cast((h - mean) * tf.math.rsqrt(var + eps) * g + b, x.dtype)


def tf_dense_stack(h: tf.Tensor, layers: Sequence[Dense], ln: Sequence[tuple], activation: Callable) -> tf.Tensor:
    """Dense layers in turn, each ``activation(layer_norm(layer(h)))``; ``ln`` holds one (gain, offset)
    pair per layer, or is empty for no layer normalisation."""
    for i, layer in enumerate(layers):
        h = layer(h)
        if ln:
            h = tf_layer_norm(h, *ln[i])
        h = activation(h)
    return h


def seeded_rng(seed: int | None) -> np.random.Generator | None:
    """A generator for weight initialisation; None (no seed) makes ``ortho_init`` draw from ``np.random``."""
    return np.random.default_rng(seed) if seed is not None else None


class Conv(tf.Module):
    """2-D convolution, NHWC."""

    def __init__(self, in_ch, out_ch, kernel, stride, padding="VALID", gain=SQRT2, rng=None, name=None):
        super().__init__(name=name)
        self.w = tf.Variable(ortho_init((kernel, kernel, in_ch, out_ch), gain, rng), name="w")
        self.b = tf.Variable(np.zeros(out_ch, np.float32), name="b")
        self.stride = int(stride)
        self.padding = padding

    def __call__(self, x):
        """The convolution in ``x``'s dtype (the float32 weights are cast to it: bfloat16 compute)."""
        if x.dtype != self.w.dtype:
            return tf.nn.conv2d(x, tf.cast(self.w, x.dtype), self.stride, self.padding) + tf.cast(self.b, x.dtype)
        return tf.nn.conv2d(x, self.w, self.stride, self.padding) + self.b

"""The numpy side of the dense layers, free of TensorFlow: activations, layer normalisation and a stack of
dense layers. Used for acting without a TF call, and inside vec-env workers (opponents of self-play)."""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np


def _np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


NUMPY_ACTIVATIONS: dict[str, Callable] = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "sigmoid": _np_sigmoid,
    "identity": lambda x: x,
}


def np_layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Layer normalisation over the last axis (the numpy mirror of ``common.nn.layers.tf_layer_norm``)."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def numpy_dense_stack(h: np.ndarray, params: Sequence[np.ndarray], num_layers: int, layer_norm: bool,
                      activation: Callable) -> np.ndarray:
    """The numpy mirror of ``common.nn.layers.tf_dense_stack``: ``params`` holds w, b per layer, followed by the
    layer-norm gain and offset when ``layer_norm``."""
    k = 4 if layer_norm else 2
    for i in range(num_layers):
        p = params[k * i : k * i + k]
        h = h @ p[0] + p[1]
        if layer_norm:
            h = np_layer_norm(h, p[2], p[3])
        h = np.tanh(h, out=h) if activation is np.tanh else activation(h)  # in place: one array fewer per layer
    return h


@functools.lru_cache(maxsize=64)
def _window_index(height: int, width: int, channels: int, kernel: int, stride: int) -> np.ndarray:
    """Flat input positions of every VALID window, [windows, kernel * kernel * channels], in the kernel's
    (row, column, channel) order."""
    out_h, out_w = (height - kernel) // stride + 1, (width - kernel) // stride + 1
    rows = np.arange(out_h)[:, None, None, None, None] * stride + np.arange(kernel)[None, None, :, None, None]
    cols = np.arange(out_w)[None, :, None, None, None] * stride + np.arange(kernel)[None, None, None, :, None]
    chans = np.arange(channels)[None, None, None, None, :]
    return ((rows * width + cols) * channels + chans).reshape(out_h * out_w, kernel * kernel * channels)


def numpy_conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """The numpy mirror of a VALID ``tf.nn.conv2d`` (NHWC input, kernel [k, k, in, out]) plus bias: every
    window gathered into one row by a cached index (3x quicker than a strided window view for one board),
    then one matrix product."""
    n, height, width, channels = x.shape
    k, out = w.shape[0], w.shape[3]
    out_h, out_w = (height - k) // stride + 1, (width - k) // stride + 1
    rows = x.reshape(n, -1)[:, _window_index(height, width, channels, k, stride)]
    return (rows.reshape(n * out_h * out_w, -1) @ w.reshape(-1, out) + b).reshape(n, out_h, out_w, out)


def numpy_conv_stack(x: np.ndarray, convs: Sequence[tuple[np.ndarray, np.ndarray, int]]) -> np.ndarray:
    """VALID convolutions with ReLU (``convs``: (kernel, bias, stride) each) on an NHWC batch, flattened."""
    h = x
    for w, b, stride in convs:
        h = np.maximum(numpy_conv2d(h, w, b, stride), 0)
    return h.reshape(len(h), -1)

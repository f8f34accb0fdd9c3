"""The numpy side of the dense layers, free of TensorFlow: activations, layer normalisation and a stack of
dense layers. Used for acting without a TF call, and inside vec-env workers (opponents of self-play)."""
from __future__ import annotations

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
    """Layer normalisation over the last axis (the numpy mirror of ``common.layers.tf_layer_norm``)."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def numpy_dense_stack(h: np.ndarray, params: Sequence[np.ndarray], num_layers: int, layer_norm: bool,
                      activation: Callable) -> np.ndarray:
    """The numpy mirror of ``common.layers.tf_dense_stack``: ``params`` holds w, b per layer, followed by the
    layer-norm gain and offset when ``layer_norm``."""
    k = 4 if layer_norm else 2
    for i in range(num_layers):
        p = params[k * i : k * i + k]
        h = h @ p[0] + p[1]
        if layer_norm:
            h = np_layer_norm(h, p[2], p[3])
        h = activation(h)
    return h


def numpy_conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    """The numpy mirror of a VALID ``tf.nn.conv2d`` (NHWC input, kernel [k, k, in, out]) plus bias: every
    window gathered into one row, then one matrix product."""
    k, _, c, out = w.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))[:, ::stride, ::stride]
    n, h, wd = windows.shape[:3]
    rows = windows.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * wd, k * k * c)
    return (rows @ w.reshape(k * k * c, out) + b).reshape(n, h, wd, out)


def numpy_conv_stack(x: np.ndarray, convs: Sequence[tuple[np.ndarray, np.ndarray, int]]) -> np.ndarray:
    """VALID convolutions with ReLU (``convs``: (kernel, bias, stride) each) on an NHWC batch, flattened."""
    h = x
    for w, b, stride in convs:
        h = np.maximum(numpy_conv2d(h, w, b, stride), 0)
    return h.reshape(len(h), -1)

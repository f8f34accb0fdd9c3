"""The networks: tf.Modules built from raw tf.Variables, and their builders (registered in ``common.nn.models``).

A builder takes the network's settings and returns a factory; ``factory(input_shape, seed=None)`` returns
a network (tf.Module) with ``output_dim``, ``recurrent`` and ``state_size``.

- Feed-forward networks map a float32 batch ``[B, *input_shape]`` to a latent ``[B, output_dim]``.
- Recurrent networks (``recurrent=True``) map a sequence ``x [T, B, *input_shape]``, a state
  ``[B, state_size]`` and episode-start flags ``resets [T, B]`` (state zeroed before that step)
  to ``(latent [T, B, output_dim], final_state)``.
- ``mlp`` and ``board_cnn`` also offer ``numpy_forward(x, params)`` with ``params = net.numpy_params()``:
  the same maths in numpy, used to act without a TF call per step.

Weights are initialised from ``np.random`` (seed it, or pass ``seed=`` to the factory), orthogonal
with baselines' gains. Image inputs must already be scaled to floats (the policy divides uint8 by 255).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from common.errors import ConfigError
from common.nn.layers import (
    Conv,
    Dense,
    activation_fns,
    numpy_dense_stack,
    ortho_init,
    seeded_rng,
    tf_dense_stack,
    tf_layer_norm,
)
from common.nn.numpy_layers import NUMPY_ACTIVATIONS, numpy_conv_stack

# ---------------------------------------------------------------- mlp


class MLP(tf.Module):
    """Fully connected layers; the input is flattened. ``compute_dtype="bfloat16"`` runs the matrix products in
    bfloat16 (weights, their gradients and the optimizer stay float32; layer normalisation and the output are
    float32); ``numpy_forward`` stays float32."""

    recurrent = False
    state_size = 0

    def __init__(self, input_shape, num_layers=2, num_hidden=64, activation="tanh", layer_norm=False, seed=None,
                 ortho_init=True, compute_dtype: str = "float32"):
        super().__init__(name="mlp")
        self.compute_dtype = _compute_dtype(compute_dtype)
        rng = seeded_rng(seed)
        self.in_dim = int(np.prod(input_shape))
        self._tf_act, self._np_act = activation_fns(activation)
        self.layer_norm = bool(layer_norm)
        self.layers = []
        self.ln = []
        d = self.in_dim
        # num_hidden: one width for num_layers layers, or a list of widths (one layer each, e.g. [400, 300])
        widths = [int(w) for w in num_hidden] if isinstance(num_hidden, (list, tuple)) else [int(num_hidden)] * int(num_layers)
        for i, width in enumerate(widths):
            self.layers.append(Dense(d, width, np.sqrt(2), rng, name=f"fc{i}", orthogonal=bool(ortho_init)))
            if self.layer_norm:
                self.ln.append((tf.Variable(np.ones(width, np.float32)), tf.Variable(np.zeros(width, np.float32))))
            d = width
        self.output_dim = d

    def __call__(self, x):
        h = tf.reshape(tf.cast(x, self.compute_dtype), [-1, self.in_dim])
        return tf.cast(tf_dense_stack(h, self.layers, self.ln, self._tf_act), tf.float32)

    @property
    def has_numpy_mirror(self) -> bool:
        return self._np_act is not None

    def numpy_variables(self) -> list[tf.Variable]:
        """The weights in the order ``numpy_forward`` expects them."""
        out = []
        for i, layer in enumerate(self.layers):
            out += [layer.w, layer.b]
            if self.layer_norm:
                out += list(self.ln[i])
        return out

    def numpy_params(self) -> list[np.ndarray]:
        """Current weights as numpy arrays, in the order ``numpy_forward`` expects."""
        return [v.numpy() for v in self.numpy_variables()]

    def numpy_forward(self, x: np.ndarray, params: list[np.ndarray] | None = None) -> np.ndarray:
        """The forward pass in numpy (float32)."""
        if self._np_act is None:
            raise TypeError("this mlp uses a custom activation callable; it has no numpy mirror")
        params = self.numpy_params() if params is None else params
        h = np.asarray(x, np.float32).reshape(len(x), self.in_dim)
        return numpy_dense_stack(h, params, len(self.layers), self.layer_norm, self._np_act)


def mlp(num_layers: int = 2, num_hidden: int | list[int] | tuple[int, ...] = 64, activation: str | Callable = "tanh",
        layer_norm: bool = False, ortho_init: bool = True, compute_dtype: str = "float32") -> Callable[..., MLP]:
    """Fully connected network: ``num_layers`` layers of ``num_hidden`` units (a list such as [400, 300]
    gives each layer's width and overrides ``num_layers``). ``ortho_init=False`` draws the weights as PyTorch
    does (stable-baselines3's ``ortho_init=False``); the actor-critic's heads follow it. ``compute_dtype``:
    see MLP ("auto": bfloat16 where the CPU multiplies it in hardware)."""
    _compute_dtype(compute_dtype)
    widths = list(num_hidden) if isinstance(num_hidden, (list, tuple)) else [num_hidden]
    if int(num_layers) < 0 or any(int(w) < 1 for w in widths) or any(int(w) > 1 << 16 for w in widths):
        raise ConfigError(f"mlp needs num_layers >= 0 and layer widths from 1 to 65536, got num_layers={num_layers}, "
                          f"num_hidden={num_hidden}")

    def factory(input_shape: Sequence[int], seed: int | None = None) -> MLP:
        return MLP(input_shape, num_layers, num_hidden, activation, layer_norm, seed, ortho_init, compute_dtype)

    return factory


# ---------------------------------------------------------------- convolutional


def _conv_out(size: int, kernel: int, stride: int, padding: str) -> int:
    return (size - kernel) // stride + 1 if padding == "VALID" else -(-size // stride)


def _as_image_shape(input_shape) -> tuple[int, int, int]:
    shape = tuple(int(s) for s in input_shape)
    if len(shape) == 2:
        shape = shape + (1,)
    if len(shape) != 3:
        raise ConfigError(f"convolutional networks need image observations (H, W, C); got shape {shape}")
    return shape


COMPUTE_DTYPES = {"float32": tf.float32, "bfloat16": tf.bfloat16}


@functools.cache
def cpu_has_bfloat16() -> bool:
    """Whether this (Linux) CPU multiplies bfloat16 in hardware (AMX or AVX512-BF16 in /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        pass
    return False


def use_float32_compute(owner: object) -> int:
    """Make every network module held by ``owner`` (or its tf.Module attributes) compute in float32 from now
    on (exports: TFLite and ONNX runtimes lack bfloat16 convolutions); returns how many were switched."""
    roots = [owner] if isinstance(owner, tf.Module) else []
    roots += [v for v in vars(owner).values() if isinstance(v, tf.Module)]
    switched = set()
    for root in roots:
        for module in (root, *root.submodules):
            if isinstance(getattr(module, "compute_dtype", None), tf.DType) and module.compute_dtype != tf.float32:
                module.compute_dtype = tf.float32
                switched.add(id(module))
    return len(switched)


def _compute_dtype(name: str) -> tf.DType:
    """The TF dtype of a ``compute_dtype`` setting ("auto": bfloat16 where ``cpu_has_bfloat16``, else
    float32); a ConfigError names the choices."""
    if name == "auto":
        return tf.bfloat16 if cpu_has_bfloat16() else tf.float32
    try:
        return COMPUTE_DTYPES[str(name)]
    except KeyError:
        choices = ", ".join([*COMPUTE_DTYPES, "auto"])
        raise ConfigError(f"compute_dtype must be one of {choices}, got {name!r}") from None


class ConvNet(tf.Module):
    """Stack of VALID convolutions with ReLU, then optional dense layers with ReLU. With ``numpy_mirror`` it
    also offers ``numpy_forward`` (im2col convolutions in numpy: quick for small boards, not for Atari frames).
    ``compute_dtype="bfloat16"`` runs the convolutions and dense layers in bfloat16 (weights, their gradients
    and the optimizer stay float32; the output is float32): faster on CPUs with AMX / AVX512-BF16, slower
    on others ("auto" picks by the CPU)."""

    recurrent = False
    state_size = 0
    layer_norm = False

    def __init__(self, input_shape, convs, fc=(), seed=None, name="cnn", numpy_mirror: bool = False,
                 compute_dtype: str = "float32"):
        super().__init__(name=name)
        self.has_numpy_mirror = bool(numpy_mirror)
        self.compute_dtype = _compute_dtype(compute_dtype)
        self._np_act = NUMPY_ACTIVATIONS["relu"]
        rng = seeded_rng(seed)
        h, w, c = _as_image_shape(input_shape)
        self.image_shape = (h, w, c)
        self.convs = []
        for i, (nf, k, s) in enumerate(convs):
            self.convs.append(Conv(c, nf, k, s, rng=rng, name=f"c{i}"))
            h, w, c = _conv_out(h, k, s, "VALID"), _conv_out(w, k, s, "VALID"), nf
            if h <= 0 or w <= 0:
                raise ConfigError(f"image {input_shape} is too small for the convolutions {convs}")
        self.flat_dim = h * w * c
        self.fcs = []
        d = self.flat_dim
        for i, n in enumerate(fc):
            self.fcs.append(Dense(d, n, np.sqrt(2), rng, name=f"fc{i}"))
            d = n
        self.output_dim = d

    def __call__(self, x):
        h = tf.reshape(tf.cast(x, self.compute_dtype), (-1,) + self.image_shape)
        for conv in self.convs:
            h = tf.nn.relu(conv(h))
        h = tf.reshape(h, [-1, self.flat_dim])
        for fc in self.fcs:
            h = tf.nn.relu(fc(h))
        return tf.cast(h, tf.float32)

    @property
    def layers(self) -> list[Dense]:
        """The dense layers after the convolutions (``numpy_dense_stack``'s view of this network)."""
        return self.fcs

    def numpy_variables(self) -> list[tf.Variable]:
        """The weights in the order ``numpy_forward`` expects them: each convolution's kernel and bias, then
        each dense layer's."""
        return [v for layer in (*self.convs, *self.fcs) for v in (layer.w, layer.b)]

    def numpy_params(self) -> list[np.ndarray]:
        """Current weights as numpy arrays, in the order ``numpy_forward`` expects."""
        return [v.numpy() for v in self.numpy_variables()]

    def numpy_conv_params(self, params: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """(kernel, bias, stride) of each convolution, from ``params`` as ``numpy_params`` orders them."""
        return [(params[2 * i], params[2 * i + 1], conv.stride) for i, conv in enumerate(self.convs)]

    def numpy_forward(self, x: np.ndarray, params: list[np.ndarray] | None = None) -> np.ndarray:
        """The forward pass in numpy (float32)."""
        if not self.has_numpy_mirror:
            raise TypeError(f"{self.name} was built without a numpy mirror")
        params = self.numpy_params() if params is None else params
        h = numpy_conv_stack(np.asarray(x, np.float32).reshape((len(x),) + self.image_shape),
                             self.numpy_conv_params(params))
        return numpy_dense_stack(h, params[2 * len(self.convs):], len(self.fcs), False, self._np_act)


NATURE_CONVS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))


def cnn(convs: list[Sequence[int]] | tuple[Sequence[int], ...] = NATURE_CONVS, num_hidden: int = 512,
        compute_dtype: str = "float32") -> Callable[..., ConvNet]:
    """Nature DQN CNN: three convolutions and a 512-unit dense layer (``compute_dtype``: see ConvNet)."""
    _compute_dtype(compute_dtype)

    def factory(input_shape: Sequence[int], seed: int | None = None) -> ConvNet:
        return ConvNet(input_shape, [tuple(c) for c in convs], (int(num_hidden),), seed, name="cnn",
                       compute_dtype=compute_dtype)

    return factory


def cnn_small(num_hidden: int = 128, compute_dtype: str = "float32") -> Callable[..., ConvNet]:
    """Small CNN: two convolutions (16 8x8/4, 32 4x4/2) and a 128-unit dense layer (``compute_dtype``: see
    ConvNet)."""
    _compute_dtype(compute_dtype)

    def factory(input_shape: Sequence[int], seed: int | None = None) -> ConvNet:
        return ConvNet(input_shape, [(16, 8, 4), (32, 4, 2)], (int(num_hidden),), seed, name="cnn_small",
                       compute_dtype=compute_dtype)

    return factory


def _grid_cnn(name: str, convs, num_hidden: int):
    """The factory of a small CNN for grids of a few cells a side: VALID convolutions, one dense layer, and a
    numpy mirror (policies act without a TF call per step)."""

    def factory(input_shape: Sequence[int], seed: int | None = None) -> ConvNet:
        return ConvNet(input_shape, [tuple(c) for c in convs], (int(num_hidden),), seed, name=name, numpy_mirror=True)

    return factory


def board_cnn(convs: list[Sequence[int]] | tuple[Sequence[int], ...] = ((64, 4, 1), (64, 2, 1)),
              num_hidden: int = 256) -> Callable[..., ConvNet]:
    """Small CNN for board games (a few cells a side): VALID convolutions (default a 4x4 then a 2x2, 64
    filters each: a 4x4 window holds every line of four), a dense layer, and a numpy mirror, so policies act
    without a TF call per step and self-play opponents can be copied to numpy."""
    return _grid_cnn("board_cnn", convs, num_hidden)


def minatar_cnn(convs: list[Sequence[int]] | tuple[Sequence[int], ...] = ((16, 3, 1),),
                num_hidden: int = 128) -> Callable[..., ConvNet]:
    """The MinAtar paper's network for its 10x10xC observations: one VALID 3x3 convolution of 16 filters and a
    128-unit dense layer (Young and Tian 2019), with a numpy mirror like ``board_cnn``."""
    return _grid_cnn("minatar_cnn", convs, num_hidden)


def conv_only(convs: list[Sequence[int]] | tuple[Sequence[int], ...] = NATURE_CONVS,
              compute_dtype: str = "float32") -> Callable[..., ConvNet]:
    """Convolutions only (list of (filters, kernel, stride)), flattened output (``compute_dtype``: see ConvNet)."""
    _compute_dtype(compute_dtype)

    def factory(input_shape: Sequence[int], seed: int | None = None) -> ConvNet:
        return ConvNet(input_shape, [tuple(c) for c in convs], (), seed, name="conv_only", compute_dtype=compute_dtype)

    return factory


class ImpalaCNN(tf.Module):
    """IMPALA CNN (Espeholt et al. 2018): conv sequences with max-pool and two residual blocks each."""

    recurrent = False
    state_size = 0
    has_numpy_mirror = False

    def __init__(self, input_shape, depths=(16, 32, 32), num_hidden=256, seed=None, compute_dtype: str = "float32"):
        super().__init__(name="impala_cnn")
        self.compute_dtype = _compute_dtype(compute_dtype)
        rng = seeded_rng(seed)
        h, w, c = _as_image_shape(input_shape)
        self.image_shape = (h, w, c)
        self.blocks = []
        for i, d in enumerate(depths):
            first = Conv(c, d, 3, 1, "SAME", rng=rng, name=f"s{i}c")
            res = [Conv(d, d, 3, 1, "SAME", rng=rng, name=f"s{i}r{j}") for j in range(4)]
            self.blocks.append((first, res))
            h, w, c = -(-h // 2), -(-w // 2), d
        self.flat_dim = h * w * c
        self.fc = Dense(self.flat_dim, int(num_hidden), np.sqrt(2), rng, name="fc")
        self.output_dim = int(num_hidden)

    def __call__(self, x):
        h = tf.reshape(tf.cast(x, self.compute_dtype), (-1,) + self.image_shape)
        for first, res in self.blocks:
            h = tf.nn.max_pool2d(first(h), 3, 2, "SAME")
            for j in (0, 2):
                h = h + res[j + 1](tf.nn.relu(res[j](tf.nn.relu(h))))
        h = tf.reshape(tf.nn.relu(h), [-1, self.flat_dim])
        return tf.cast(tf.nn.relu(self.fc(h)), tf.float32)


def impala_cnn(depths: list[int] | tuple[int, ...] = (16, 32, 32), num_hidden: int = 256,
               compute_dtype: str = "float32") -> Callable[..., ImpalaCNN]:
    """IMPALA CNN with the given channel depths (``compute_dtype``: see ConvNet)."""
    _compute_dtype(compute_dtype)

    def factory(input_shape: Sequence[int], seed: int | None = None) -> ImpalaCNN:
        return ImpalaCNN(input_shape, tuple(int(d) for d in depths), num_hidden, seed, compute_dtype)

    return factory


# ---------------------------------------------------------------- recurrent


class Flatten(tf.Module):
    """Flattens the input (the feature extractor of plain ``lstm``)."""

    recurrent = False
    state_size = 0

    def __init__(self, input_shape):
        super().__init__(name="flatten")
        self.output_dim = int(np.prod(input_shape))

    def __call__(self, x):
        return tf.reshape(tf.cast(x, tf.float32), [-1, self.output_dim])


class LSTMNet(tf.Module):
    """Feature extractor followed by an LSTM; state is ``[c, h]`` concatenated (``2 * nlstm``)."""

    recurrent = True
    has_numpy_mirror = False

    def __init__(self, features: tf.Module, input_shape, nlstm=128, layer_norm=False, seed=None):
        super().__init__(name="lstm")
        rng = seeded_rng(seed)
        self.features = features
        self.input_shape = tuple(int(s) for s in input_shape)
        self.nlstm = int(nlstm)
        self.layer_norm = bool(layer_norm)
        nin = features.output_dim
        self.wx = tf.Variable(ortho_init((nin, 4 * nlstm), 1.0, rng), name="wx")
        self.wh = tf.Variable(ortho_init((nlstm, 4 * nlstm), 1.0, rng), name="wh")
        self.b = tf.Variable(np.zeros(4 * nlstm, np.float32), name="b")
        if self.layer_norm:
            self.ln = [
                (tf.Variable(np.ones(n, np.float32)), tf.Variable(np.zeros(n, np.float32)))
                for n in (4 * nlstm, 4 * nlstm, nlstm)
            ]
        self.output_dim = self.nlstm
        self.state_size = 2 * self.nlstm

    def initial_state(self, batch_size: int) -> np.ndarray:
        """Zero state for ``batch_size`` sequences."""
        return np.zeros((batch_size, self.state_size), np.float32)

    def _input_weights(self, feats):
        xw = tf.matmul(feats, self.wx)
        return tf_layer_norm(xw, *self.ln[0]) if self.layer_norm else xw

    def _cell(self, carry, inputs):
        """One LSTM step: state ``[c, h]`` (zeroed where ``keep_t`` is 0) and input projections -> next state."""
        xw_t, keep_t = inputs
        c, h = tf.split(carry * keep_t, 2, axis=-1)
        hw = tf.matmul(h, self.wh)
        if self.layer_norm:
            hw = tf_layer_norm(hw, *self.ln[1])
        z = xw_t + hw + self.b
        i, f, o, u = tf.split(z, 4, axis=-1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(u)
        cn = tf_layer_norm(c, *self.ln[2]) if self.layer_norm else c
        h = tf.sigmoid(o) * tf.tanh(cn)
        return tf.concat([c, h], axis=-1)

    def __call__(self, x, state, resets):
        shape = tf.shape(x)
        t, b = shape[0], shape[1]
        feats = self.features(tf.reshape(x, tf.concat([[t * b], self.input_shape], axis=0)))
        xw = tf.reshape(self._input_weights(feats), [t, b, 4 * self.nlstm])
        keep = 1.0 - tf.cast(resets, tf.float32)[..., None]
        states = tf.scan(self._cell, (xw, keep), initializer=tf.convert_to_tensor(state, tf.float32))
        return states[..., self.nlstm :], states[-1]

    def step(self, x: tf.Tensor, state: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """One time step without a loop: ``x [B, ...]``, ``state [B, state_size]`` -> ``(latent, state)``
        (what ``__call__`` gives for T=1 and no reset; exported policies use it, as TFLite cannot convert
        ``tf.scan`` over a dynamic batch)."""
        feats = self.features(tf.reshape(x, tf.concat([[-1], self.input_shape], axis=0)))
        state = self._cell(tf.convert_to_tensor(state, tf.float32), (self._input_weights(feats), 1.0))
        return state[..., self.nlstm :], state


def lstm(nlstm: int = 128, layer_norm: bool = False) -> Callable[..., LSTMNet]:
    """LSTM over the flattened observation."""

    def factory(input_shape: Sequence[int], seed: int | None = None) -> LSTMNet:
        return LSTMNet(Flatten(input_shape), input_shape, nlstm, layer_norm, seed)

    return factory


def cnn_lstm(nlstm: int = 256, layer_norm: bool = False, num_hidden: int = 512,
             compute_dtype: str = "float32") -> Callable[..., LSTMNet]:
    """Nature CNN followed by an LSTM (``compute_dtype``: the CNN's, see ConvNet; the LSTM is float32)."""
    _compute_dtype(compute_dtype)

    def factory(input_shape: Sequence[int], seed: int | None = None) -> LSTMNet:
        feats = ConvNet(input_shape, list(NATURE_CONVS), (int(num_hidden),), seed, name="cnn",
                        compute_dtype=compute_dtype)
        return LSTMNet(feats, input_shape, nlstm, layer_norm, None if seed is None else seed + 1)

    return factory

"""Q-function: any registered feed-forward network plus a (dueling, distributional, noisy) head, with a numpy
mirror for mlp."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from algos.deepq.noisy import NoisyDense, noisy_weights
from common.errors import ConfigError
from common.nn.layers import (
    ACTIVATIONS,
    SQRT2,
    Dense,
    numpy_dense_stack,
    tf_dense_stack,
    tf_layer_norm,
)
from common.nn.models import build_network


class _Stream(tf.Module):
    """Hidden ReLU layers (optionally layer-normalised) followed by a linear output layer; with ``noisy_sigma0``
    every layer is a ``NoisyDense``."""

    def __init__(self, in_dim: int, hiddens: Sequence[int], out_dim: int, layer_norm: bool, rng, name: str,
                 orthogonal: bool = True, noisy_sigma0: float | None = None):
        super().__init__(name=name)
        self.layer_norm = bool(layer_norm)
        self.noisy = noisy_sigma0 is not None
        self.hidden = []
        self.ln = []
        d = in_dim

        def dense(n_in: int, n_out: int, gain: float, layer_name: str) -> Dense | NoisyDense:
            if self.noisy:
                return NoisyDense(n_in, n_out, noisy_sigma0, rng, name=layer_name)
            return Dense(n_in, n_out, gain, rng, name=layer_name, orthogonal=orthogonal)

        for i, h in enumerate(hiddens):
            self.hidden.append(dense(d, int(h), SQRT2, f"h{i}"))
            if self.layer_norm:
                self.ln.append((tf.Variable(np.ones(h, np.float32), name=f"ln{i}_g"),
                                tf.Variable(np.zeros(h, np.float32), name=f"ln{i}_b")))
            d = int(h)
        self.out = dense(d, out_dim, 1.0, "out")

    def __call__(self, h, noise=None):
        if noise is None:
            return self.out(tf_dense_stack(h, self.hidden, self.ln, tf.nn.relu))
        for i, layer in enumerate(self.hidden):  # tf_dense_stack with each layer's noise
            h = layer(h, noise[i])
            if self.ln:
                h = tf_layer_norm(h, *self.ln[i])
            h = tf.nn.relu(h)
        return self.out(h, noise[-1])

    def layers(self) -> list:
        """The dense layers in order (hidden ones, then the output)."""
        return [*self.hidden, self.out]

    def with_noise(self, params: list[np.ndarray], sigmas: list, noise: list) -> list[np.ndarray]:
        """``params`` (``variables_in_order`` as numpy) with each noisy layer's weights under ``noise``."""
        out = list(params)
        width = 2 + (2 if self.layer_norm else 0)
        positions = [i * width for i in range(len(self.hidden))] + [len(params) - 2]
        for pos, sigma, e in zip(positions, sigmas, noise):
            out[pos], out[pos + 1] = noisy_weights(params[pos], params[pos + 1], sigma, e)
        return out

    def variables_in_order(self) -> list[tf.Variable]:
        """Variables in the order ``numpy_forward`` reads them."""
        out = []
        for i, layer in enumerate(self.hidden):
            out += [layer.w, layer.b]
            if self.layer_norm:
                out += list(self.ln[i])
        return out + [self.out.w, self.out.b]

    def perturbable(self) -> list[bool]:
        """Mask over ``variables_in_order``: False for layer-norm gains/offsets (parameter noise leaves them)."""
        mask = []
        for _ in self.hidden:
            mask += [True, True] + ([False, False] if self.layer_norm else [])
        return mask + [True, True]

    def numpy_forward(self, h: np.ndarray, params: list[np.ndarray]) -> np.ndarray:
        """The same maths in numpy with ``params`` from ``variables_in_order``."""
        h = numpy_dense_stack(h, params, len(self.hidden), self.layer_norm, ACTIVATIONS["relu"][1])
        return h @ params[-2] + params[-1]


class QFunction(tf.Module):
    """Maps an encoded observation batch to Q-values ``[B, num_actions]``.

    Args:
        input_shape: shape of one encoded observation.
        num_actions: size of the Discrete action space.
        network: registered network name or builder (must be feed-forward).
        hiddens: sizes of the head's hidden ReLU layers (after the network's latent).
        dueling: separate state-value and advantage streams, ``Q = V + A - mean(A)``.
        layer_norm: layer normalisation in the head's hidden layers.
        scale_images: divide uint8 inputs by 255 (image observations).
        seed: seed of the weight initialisation.
        outputs_per_action: 0: one Q-value per action ``[B, A]``; K: K outputs per action ``[B, A, K]`` (the
            atoms or quantiles of a distributional head; dueling combines them per output).
        noisy_sigma0: None, or the head's layers are factorised noisy layers with this initial sigma; their
            noise is ``noise`` of ``__call__`` (``noise_shapes()``), none for the mean network.
        network_kwargs: passed to the network builder.
    """

    def __init__(self, input_shape, num_actions: int, network: str | Callable = "mlp", hiddens: Sequence[int] = (256,),
                 dueling: bool = True, layer_norm: bool = False, scale_images: bool = False, seed: int | None = None,
                 outputs_per_action: int = 0, noisy_sigma0: float | None = None, **network_kwargs):
        super().__init__(name="q")
        base = np.random.SeedSequence(seed) if seed is not None else np.random.SeedSequence()
        s_net, s_head = (int(s.generate_state(1)[0]) for s in base.spawn(2))
        self.net = build_network(network, input_shape, seed=s_net, **network_kwargs)
        if getattr(self.net, "recurrent", False):
            raise ConfigError(f"deepq needs a feed-forward network; {network!r} is recurrent")
        rng = np.random.default_rng(s_head)
        self.num_actions = int(num_actions)
        self.dueling = bool(dueling)
        self.scale_images = bool(scale_images)
        d = int(self.net.output_dim)
        orthogonal = bool(network_kwargs.get("ortho_init", True))  # an mlp's switch, followed by the streams
        self.k = int(outputs_per_action)
        width = max(self.k, 1)
        self.adv = _Stream(d, hiddens, self.num_actions * width, layer_norm, rng, "action_value", orthogonal,
                           noisy_sigma0)
        self.value = (_Stream(d, hiddens, width, layer_norm, rng, "state_value", orthogonal, noisy_sigma0)
                      if self.dueling else None)
        self.noisy = noisy_sigma0 is not None
        self.has_numpy_mirror = bool(getattr(self.net, "has_numpy_mirror", False))

    def __call__(self, x, noise=None):
        """Q-values ``[B, A]`` (or outputs ``[B, A, K]``) of an encoded batch; ``noise``: one (e_in, e_out)
        pair per noisy layer in ``noise_shapes()`` order, or None."""
        x = tf.cast(x, tf.float32)
        if self.scale_images:
            x = x / 255.0
        latent = self.net(x)
        noise_a, noise_v = self._split(noise)
        q = self.adv(latent, noise_a)
        if self.k:
            q = tf.reshape(q, [-1, self.num_actions, self.k])
        if self.dueling:
            v = self.value(latent, noise_v)
            if self.k:
                v = v[:, None, :]
            q = v + q - tf.reduce_mean(q, axis=1, keepdims=True)
        return q

    def _split(self, noise):
        """``noise`` as (the advantage stream's, the value stream's)."""
        if noise is None:
            return None, None
        n = len(self.adv.layers())
        return list(noise[:n]), list(noise[n:])

    def _streams(self) -> list[_Stream]:
        return [self.adv] + ([self.value] if self.dueling else [])

    def noise_shapes(self) -> list[tuple[int, int]]:
        """(in, out) of each noisy layer, in the order ``noise`` lists them (empty without noisy layers)."""
        if not self.noisy:
            return []
        return [(layer.in_dim, layer.out_dim) for stream in self._streams() for layer in stream.layers()]

    def numpy_sigmas(self) -> list:
        """The noisy layers' (w_sigma, b_sigma) as numpy arrays, in ``noise_shapes()`` order."""
        return [layer.sigmas() for stream in self._streams() for layer in stream.layers()]

    def with_noise(self, params: tuple, sigmas: list, noise: list) -> tuple:
        """``numpy_params()`` with the noisy layers' weights under ``noise`` (``numpy_forward`` then acts as
        ``__call__`` with that noise)."""
        n = len(self.adv.layers())
        adv = self.adv.with_noise(params[1], sigmas[:n], noise[:n])
        value = None if params[2] is None else self.value.with_noise(params[2], sigmas[n:], noise[n:])
        return params[0], adv, value

    def numpy_params(self) -> tuple:
        """Current weights as numpy arrays for ``numpy_forward``."""
        value = None if self.value is None else [v.numpy() for v in self.value.variables_in_order()]
        return self.net.numpy_params(), [v.numpy() for v in self.adv.variables_in_order()], value

    def mirror_variables(self) -> list[tf.Variable]:
        """The variables behind ``numpy_params()`` and ``numpy_sigmas()``, flat and in their order (empty without
        a numpy mirror): read them in one call and regroup the values with ``mirror_values``."""
        if not self.has_numpy_mirror:
            return []
        value = [] if self.value is None else self.value.variables_in_order()
        sigmas = [v for stream in self._streams() for layer in stream.layers() for v in (layer.w_sigma, layer.b_sigma)
                  ] if self.noisy else []
        return [*self.net.numpy_variables(), *self.adv.variables_in_order(), *value, *sigmas]

    def mirror_values(self, arrays: list[np.ndarray]) -> tuple[tuple, list]:
        """``(numpy_params(), numpy_sigmas())`` from the values of ``mirror_variables()`` in its order (the
        sigmas an empty list without noisy layers)."""
        sizes = [len(self.net.numpy_variables()), len(self.adv.variables_in_order()),
                 0 if self.value is None else len(self.value.variables_in_order())]
        ends = np.cumsum(sizes).tolist()
        net, adv, value = (list(arrays[a:b]) for a, b in zip([0, *ends[:-1]], ends))
        rest = arrays[ends[-1]:]
        return (net, adv, value if self.value is not None else None), list(zip(rest[0::2], rest[1::2]))

    def perturbable(self) -> tuple:
        """Masks shaped like ``numpy_params()``: True for the weights and biases parameter noise perturbs,
        False for the head's layer-norm gains and offsets (``layer_norm`` is the head's; the network has none)."""
        value = None if self.value is None else self.value.perturbable()
        return [True] * len(self.net.numpy_params()), self.adv.perturbable(), value

    def numpy_forward(self, x: np.ndarray, params: tuple) -> np.ndarray:
        """``__call__`` without noise in numpy (only when ``has_numpy_mirror``)."""
        x = np.asarray(x, np.float32)
        if self.scale_images:
            x = x / 255.0
        latent = self.net.numpy_forward(x, params[0])
        q = self.adv.numpy_forward(latent, params[1])
        if self.k:
            q = q.reshape(-1, self.num_actions, self.k)
        if self.dueling:
            v = self.value.numpy_forward(latent, params[2])
            q = (v[:, None, :] if self.k else v) + q - q.mean(axis=1, keepdims=True)
        return q

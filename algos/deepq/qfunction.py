"""Q-function: any registered feed-forward network plus a (dueling) head, with a numpy mirror for mlp."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from common.errors import ConfigError
from common.nn.layers import (
    ACTIVATIONS,
    SQRT2,
    Dense,
    numpy_dense_stack,
    tf_dense_stack,
)
from common.nn.models import build_network


class _Stream(tf.Module):
    """Hidden ReLU layers (optionally layer-normalised) followed by a linear output layer."""

    def __init__(self, in_dim: int, hiddens: Sequence[int], out_dim: int, layer_norm: bool, rng, name: str,
                 orthogonal: bool = True):
        super().__init__(name=name)
        self.layer_norm = bool(layer_norm)
        self.hidden = []
        self.ln = []
        d = in_dim
        for i, h in enumerate(hiddens):
            self.hidden.append(Dense(d, int(h), SQRT2, rng, name=f"h{i}", orthogonal=orthogonal))
            if self.layer_norm:
                self.ln.append((tf.Variable(np.ones(h, np.float32), name=f"ln{i}_g"),
                                tf.Variable(np.zeros(h, np.float32), name=f"ln{i}_b")))
            d = int(h)
        self.out = Dense(d, out_dim, 1.0, rng, name="out", orthogonal=orthogonal)

    def __call__(self, h):
        return self.out(tf_dense_stack(h, self.hidden, self.ln, tf.nn.relu))

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
        network_kwargs: passed to the network builder.
    """

    def __init__(self, input_shape, num_actions: int, network: str | Callable = "mlp", hiddens: Sequence[int] = (256,),
                 dueling: bool = True, layer_norm: bool = False, scale_images: bool = False, seed: int | None = None,
                 **network_kwargs):
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
        self.adv = _Stream(d, hiddens, self.num_actions, layer_norm, rng, "action_value", orthogonal)
        self.value = _Stream(d, hiddens, 1, layer_norm, rng, "state_value", orthogonal) if self.dueling else None
        self.has_numpy_mirror = bool(getattr(self.net, "has_numpy_mirror", False))

    def __call__(self, x):
        x = tf.cast(x, tf.float32)
        if self.scale_images:
            x = x / 255.0
        latent = self.net(x)
        q = self.adv(latent)
        if self.dueling:
            q = self.value(latent) + q - tf.reduce_mean(q, axis=1, keepdims=True)
        return q

    def numpy_params(self) -> tuple:
        """Current weights as numpy arrays for ``numpy_forward``."""
        value = None if self.value is None else [v.numpy() for v in self.value.variables_in_order()]
        return self.net.numpy_params(), [v.numpy() for v in self.adv.variables_in_order()], value

    def perturbable(self) -> tuple:
        """Masks shaped like ``numpy_params()``: True for the weights and biases parameter noise perturbs,
        False for the head's layer-norm gains and offsets (``layer_norm`` is the head's; the network has none)."""
        value = None if self.value is None else self.value.perturbable()
        return [True] * len(self.net.numpy_params()), self.adv.perturbable(), value

    def numpy_forward(self, x: np.ndarray, params: tuple) -> np.ndarray:
        """Q-values in numpy (only when ``has_numpy_mirror``)."""
        x = np.asarray(x, np.float32)
        if self.scale_images:
            x = x / 255.0
        latent = self.net.numpy_forward(x, params[0])
        q = self.adv.numpy_forward(latent, params[1])
        if self.dueling:
            q = self.value.numpy_forward(latent, params[2]) + q - q.mean(axis=1, keepdims=True)
        return q

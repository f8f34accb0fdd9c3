"""The network registry: names (``--network=name``) to network builders, and ``build_network``.

``get_network_builder(name)(**kwargs)`` returns a factory; ``factory(input_shape)`` returns a network
(tf.Module) with ``output_dim``, ``recurrent`` and ``state_size`` (see ``common.nn.networks``). This
project's networks are registered on import; ``register`` adds others.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf

from common.errors import ConfigError
from common.nn import networks

_REGISTRY: dict[str, Callable] = {}


def register(name: str) -> Callable[[Callable], Callable]:
    """Decorator: register a network builder under ``name`` (usable as ``--network=name``)."""

    def deco(fn: Callable) -> Callable:
        _REGISTRY[name] = fn
        fn.network_name = name
        return fn

    return deco


def registered_networks() -> list[str]:
    """Names of all registered networks."""
    return sorted(_REGISTRY)


def get_network_builder(name: str | Callable) -> Callable:
    """The builder registered as ``name`` (or ``name`` itself when it is a callable).

    ``"package.module:builder"`` imports the module first (its ``@register`` runs) and returns
    ``builder`` (a registered name or a function of the module).
    """
    if callable(name):
        return name
    if not isinstance(name, str):
        raise TypeError(f"network must be a name or a callable, got {type(name).__name__}")
    if name in _REGISTRY:
        return _REGISTRY[name]
    if ":" in name:
        import importlib

        mod_name, _, attr = name.partition(":")
        try:
            mod = importlib.import_module(mod_name)
        except ImportError as e:
            raise ConfigError(f"cannot import network module {mod_name!r}: {e}") from None
        if attr in _REGISTRY:
            return _REGISTRY[attr]
        if callable(getattr(mod, attr, None)):
            return getattr(mod, attr)
    raise ConfigError(f"unknown network {name!r}; known: {', '.join(registered_networks())}")


BUILTIN_NETWORKS: dict[str, Callable] = {
    "mlp": networks.mlp,
    "cnn": networks.cnn,
    "cnn_small": networks.cnn_small,
    "conv_only": networks.conv_only,
    "board_cnn": networks.board_cnn,
    "minatar_cnn": networks.minatar_cnn,
    "impala_cnn": networks.impala_cnn,
    "lstm": networks.lstm,
    "cnn_lstm": networks.cnn_lstm,
}
for _name, _builder in BUILTIN_NETWORKS.items():
    register(_name)(_builder)


def build_network(network: str | Callable, input_shape: Sequence[int], seed: int | None = None,
                  **network_kwargs) -> tf.Module:
    """Build a network from a registered name (or builder) and its kwargs for ``input_shape``."""
    builder = get_network_builder(network)
    try:
        factory = builder(**network_kwargs)
    except TypeError as e:
        raise ConfigError(f"bad keyword arguments for network {network!r}: {e}") from None
    try:
        return factory(input_shape, seed=seed)
    except TypeError:  # user factories may not take a seed
        return factory(input_shape)

"""The whole state of one runner env (its wrapper chain under the Monitor and the env itself), for
checkpoints that resume episodes exactly.

An env is restorable when the env itself implements the protocol ``get_state() -> dict`` (JSON-able
values and numpy arrays) and ``set_state(state)``, and every wrapper between it and the Monitor is one
whose state is known here (gymnasium's TimeLimit, OrderEnforcing, the passive checker, observation
flattening, the action-mask reader) or implements the protocol too. Anything else: ``capture`` returns None and a resumed run
restarts that env's episode.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.wrappers import (
    FlattenObservation,
    OrderEnforcing,
    PassiveEnvChecker,
    TimeLimit,
)

from common.wrappers.action_mask import ActionMaskInfo

_STATELESS = (PassiveEnvChecker, FlattenObservation, ActionMaskInfo)
_KNOWN = {TimeLimit: ("_elapsed_steps",), OrderEnforcing: ("_has_reset",)}


def _own(obj: Any, name: str) -> bool:
    """Whether ``obj``'s class defines ``name`` itself (not a forwarding wrapper's attribute)."""
    return any(name in vars(cls) for cls in type(obj).__mro__ if cls not in (gym.Env, gym.Wrapper))


def capture(env: gym.Env) -> list[Any] | None:
    """One entry per layer from ``env`` down to the innermost env; None when a layer cannot be captured."""
    out: list[Any] = []
    layer = env
    while True:
        if _own(layer, "get_state") and _own(layer, "set_state"):
            out.append(layer.get_state())
        elif type(layer) in _KNOWN:
            out.append({name: getattr(layer, name) for name in _KNOWN[type(layer)]})
        elif isinstance(layer, _STATELESS):
            out.append(None)
        else:
            return None
        if not isinstance(layer, gym.Wrapper):
            return out
        layer = layer.env


def restore(env: gym.Env, state: list[Any]) -> None:
    """Put what ``capture`` returned back, layer by layer (ValueError when the chain differs)."""
    layer = env
    for entry in state:
        if _own(layer, "get_state") and _own(layer, "set_state"):
            layer.set_state(entry)
        elif type(layer) in _KNOWN:
            for name in _KNOWN[type(layer)]:
                setattr(layer, name, type(getattr(layer, name))(entry[name]))
        elif not isinstance(layer, _STATELESS):
            raise ValueError(f"env layer {type(layer).__name__} cannot be restored")
        layer = getattr(layer, "env", None)
    if layer is not None:
        raise ValueError("the saved env state has fewer layers than this env")

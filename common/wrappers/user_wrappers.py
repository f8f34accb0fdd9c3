"""The user's own env wrappers (``--wrapper=pkg.mod:Cls`` or ``--wrapper="pkg.mod:Cls(k=1)"``).

A spec names a ``gymnasium.Wrapper`` subclass by ``module:name`` with optional keyword arguments written
as Python literals. Specs are strings, so they travel to subprocess workers and into model files; each
process imports the wrapper's module itself.
"""
from __future__ import annotations

import ast
import importlib
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from common.errors import ConfigError


def parse_wrapper(spec: str) -> tuple[str, str, dict[str, Any]]:
    """(module, class name, kwargs) of a spec; ConfigError when it is not ``module:Name[(k=literal, ...)]``."""
    path, _, call = spec.strip().partition("(")
    module, colon, name = path.partition(":")
    if not colon or not module or not name.isidentifier():
        raise ConfigError(f"--wrapper {spec!r}: expected module:Class or module:Class(key=value, ...)")
    kwargs: dict[str, Any] = {}
    if call:
        try:
            node = ast.parse(f"f({call}", mode="eval").body
            if not isinstance(node, ast.Call) or node.args:
                raise ValueError("positional arguments")
            kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
        except (SyntaxError, ValueError) as e:
            raise ConfigError(f"--wrapper {spec!r}: arguments must be key=literal ({e})") from None
    return module, name, kwargs


def wrapper_class(spec: str) -> tuple[type, dict[str, Any]]:
    """The wrapper class a spec names and its kwargs; ConfigError when it cannot be imported or is not a
    ``gymnasium.Wrapper`` subclass."""
    module, name, kwargs = parse_wrapper(spec)
    try:
        cls = getattr(importlib.import_module(module), name)
    except ImportError as e:
        raise ConfigError(f"--wrapper {spec!r}: cannot import {module} ({e})") from None
    except AttributeError:
        raise ConfigError(f"--wrapper {spec!r}: {module} has no {name}") from None
    if not (isinstance(cls, type) and issubclass(cls, gym.Wrapper)):
        raise ConfigError(f"--wrapper {spec!r}: {module}:{name} is not a gymnasium.Wrapper subclass")
    return cls, kwargs


def apply_wrappers(env: gym.Env, specs: Sequence[str]) -> gym.Env:
    """``env`` wrapped by each spec in order (the first is innermost)."""
    for spec in specs:
        cls, kwargs = wrapper_class(spec)
        env = cls(env, **kwargs)
    return env

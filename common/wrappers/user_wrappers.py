"""The user's own env wrappers (``--wrapper=pkg.mod:Cls`` or ``--wrapper="pkg.mod:Cls(k=1)"``).

A spec names a ``gymnasium.Wrapper`` subclass by ``module:name`` with optional keyword arguments written
as Python literals; for a PettingZoo parallel env it names a function of the parallel env instead
(SuperSuit's ``supersuit:resize_v1(x_size=84, y_size=84)``: called as ``resize_v1(env, x_size=84, y_size=84)``).
Specs are strings, so they travel to subprocess workers and into model files; each process imports the
wrapper's module itself.
"""
from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Callable, Sequence
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


def _named(spec: str) -> tuple[Any, dict[str, Any]]:
    """The object a spec names and its kwargs; ConfigError when its module does not import or lacks it."""
    module, name, kwargs = parse_wrapper(spec)
    try:
        return getattr(importlib.import_module(module), name), kwargs
    except ImportError as e:
        raise ConfigError(f"--wrapper {spec!r}: cannot import {module} ({e})") from None
    except AttributeError:
        raise ConfigError(f"--wrapper {spec!r}: {module} has no {name}") from None


def wrapper_class(spec: str) -> tuple[type, dict[str, Any]]:
    """The wrapper class a spec names and its kwargs; ConfigError when it cannot be imported or is not a
    ``gymnasium.Wrapper`` subclass."""
    cls, kwargs = _named(spec)
    if not (isinstance(cls, type) and issubclass(cls, gym.Wrapper)):
        raise ConfigError(f"--wrapper {spec!r}: {spec.partition('(')[0].strip()} is not a gymnasium.Wrapper subclass")
    return cls, kwargs


def apply_wrappers(env: gym.Env, specs: Sequence[str]) -> gym.Env:
    """``env`` wrapped by each spec in order (the first is innermost)."""
    for spec in specs:
        cls, kwargs = wrapper_class(spec)
        env = cls(env, **kwargs)
    return env


def parallel_wrapper(spec: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The function a spec names for PettingZoo parallel envs and its kwargs; ConfigError when it cannot be
    imported, is a gymnasium wrapper, or does not take ``(env, **kwargs)``."""
    fn, kwargs = _named(spec)
    if isinstance(fn, type) and issubclass(fn, gym.Wrapper):
        raise ConfigError(f"--wrapper {spec!r} wraps gymnasium envs; a PettingZoo parallel env takes functions of "
                          "parallel envs, such as SuperSuit's (--wrapper=\"supersuit:resize_v1(x_size=84, y_size=84)\")")
    if not callable(fn):
        raise ConfigError(f"--wrapper {spec!r}: not a function of a parallel env")
    try:
        inspect.signature(fn).bind(None, **kwargs)
    except TypeError as e:
        raise ConfigError(f"--wrapper {spec!r}: {e}") from None
    except ValueError:  # no signature to read (a builtin): the call itself will tell
        pass
    return fn, kwargs


def apply_parallel_wrappers(env: Any, specs: Sequence[str]) -> Any:
    """The PettingZoo parallel ``env`` wrapped by each spec's function in order (the first innermost);
    ConfigError when a function refuses the env (an assertion about its spaces) or returns no parallel env."""
    for spec in specs:
        fn, kwargs = parallel_wrapper(spec)
        try:
            wrapped = fn(env, **kwargs)
        except AssertionError as e:  # SuperSuit checks the env's spaces with assertions
            raise ConfigError(f"--wrapper {spec!r} does not take this env: {e}") from None
        if not all(hasattr(wrapped, name) for name in ("possible_agents", "reset", "step", "observation_space")):
            raise ConfigError(f"--wrapper {spec!r} returned {type(wrapped).__name__}, not a PettingZoo parallel env")
        env = wrapped
    return env

"""Glue for run.py: find the env type, the algorithm, its defaults, and check the user's kwargs.

Nothing here imports TensorFlow: algorithms import it themselves when they are loaded.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import tempfile
import types
import typing
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from common.atari_wrappers import register_atari_envs
from common.errors import UserError

ALGOS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "algos")
ATARI_PREFIXES = ("ALE/",)


class UsageError(UserError):
    """A mistake in the command line or the arguments of ``run.main``; the message is one line."""


def known_algorithms() -> list[str]:
    """Names of the algorithms in algos/ (folders holding ``<alg>/<alg>.py``)."""
    if not os.path.isdir(ALGOS_DIR):
        return []
    return sorted(
        name for name in os.listdir(ALGOS_DIR)
        if os.path.isfile(os.path.join(ALGOS_DIR, name, f"{name}.py"))
    )


def _close(word: str, choices: list[str], n: int = 3) -> str:
    """', '.join of close matches (case-insensitive), or '' when none."""
    lower = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(word.lower(), list(lower), n=n, cutoff=0.6)
    return ", ".join(lower[h] for h in hits)


def _import_missing_ok(module: str) -> types.ModuleType | None:
    """Import ``module``; None when that module (or a parent package) does not exist.

    Import errors raised from inside the module (a missing dependency, a bug) propagate.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            return None
        raise


def get_alg_module(alg: str, submodule: str | None = None) -> types.ModuleType:
    """The module of algorithm ``alg`` (``algos.<alg>.<alg>``, or ``<submodule>``), or the module
    part of the external form ``package.module:function``.

    Raises:
        UsageError: unknown algorithm (the message lists the known ones).
    """
    if ":" in alg:
        modname = alg.split(":", 1)[0]
        mod = _import_missing_ok(modname)
        if mod is None:
            raise UsageError(f"cannot import algorithm module '{modname}' (from --alg={alg})")
        return mod
    known = known_algorithms()
    if alg not in known:
        hint = _close(alg, known)
        hint = f" (did you mean {hint}?)" if hint else ""
        raise UsageError(f"unknown algorithm '{alg}'{hint}; known: {', '.join(known) or 'none'}")
    modname = f"algos.{alg}.{submodule or alg}"
    mod = _import_missing_ok(modname)
    if mod is None:
        raise UsageError(f"algorithm '{alg}' has no module {modname}")
    return mod


def get_learn_function(alg: str) -> Callable[..., Any]:
    """``learn`` of ``alg``; for ``package.module:function`` that function."""
    mod = get_alg_module(alg)
    fname = alg.split(":", 1)[1] if ":" in alg else "learn"
    fn = getattr(mod, fname, None)
    if not callable(fn):
        raise UsageError(f"algorithm '{alg}' has no function '{fname}' in {mod.__name__}")
    return fn


def get_learn_function_defaults(alg: str, env_type: str) -> dict[str, Any]:
    """Per-env-type hyperparameters: ``algos/<alg>/defaults.py``'s function named ``env_type``.

    For ``package.module:function`` algorithms: that module's ``defaults(env_type) -> dict`` if any.
    A missing defaults module or function gives {}; any other import error propagates.
    """
    if ":" in alg:
        fn = getattr(get_alg_module(alg), "defaults", None)
        return dict(fn(env_type)) if callable(fn) else {}
    mod = _import_missing_ok(f"algos.{alg}.defaults")
    fn = getattr(mod, env_type, None) if mod is not None else None
    return dict(fn()) if callable(fn) else {}


def _looks_atari(env_id: str) -> bool:
    return env_id.startswith(ATARI_PREFIXES) or "NoFrameskip" in env_id or env_id.endswith(
        ("Deterministic-v4", "-ram-v4", "-ram-v5"))


def env_type_of_spec(spec: gym.envs.registration.EnvSpec) -> str:
    """The env type of a registered env: the module that provides it.

    ``gymnasium.envs.<kind>...`` gives ``<kind>`` (classic_control, box2d, toy_text, mujoco, ...),
    ``ale_py`` gives ``atari``, anything else the top-level package of the entry point
    (``envs`` for this project's envs, ``mypkg`` for ``mypkg.envs:MyEnv``).
    """
    ep = spec.entry_point
    if spec.namespace == "ALE":
        return "atari"
    module = ep.split(":", 1)[0] if isinstance(ep, str) else getattr(ep, "__module__", "") or ""
    if not isinstance(ep, str) and "mujoco" in getattr(ep, "__name__", ""):
        return "mujoco"
    parts = module.split(".")
    if parts[:2] == ["gymnasium", "envs"] and len(parts) > 2:
        return parts[2]
    if parts[0] in ("ale_py", "gym_ale"):
        return "atari"
    return parts[0] or "unknown"


def get_env_type(env_id: str, env_type: str | None = None) -> tuple[str, str]:
    """Resolve ``env_id`` (optionally ``module:EnvId``) to ``(env_type, env_id)``.

    ``module:EnvId`` imports the module first (it registers the env); ``env_type`` overrides the
    detected type. The project's own ``envs`` package is always imported.

    Raises:
        UsageError: the module does not import, or the env id is not registered (with close ids).
    """
    if not env_id:
        raise UsageError("no env given; pass --env=ENV_ID (for example --env=CartPole-v1)")
    if ":" in env_id:
        modname, env_id = env_id.split(":", 1)
        try:
            importlib.import_module(modname)
        except ImportError as e:
            raise UsageError(f"module '{modname}' (from --env={modname}:{env_id}) does not import: {e}") from e
    _import_missing_ok("envs")
    if env_id not in gym.registry and _looks_atari(env_id) and not register_atari_envs():
        raise UsageError(f"env '{env_id}' looks like an Atari env, which needs ale-py: pip install ale-py")
    if env_id not in gym.registry:
        hint = _close(env_id, list(gym.registry), n=5)
        hint = f"; closest registered ids: {hint}" if hint else ""
        raise UsageError(f"unknown env id '{env_id}'{hint} (use module:EnvId to import a module that registers it)")
    return (env_type or env_type_of_spec(gym.spec(env_id))), env_id


# ---------------------------------------------------------------------------------------------
# checking the extra --k=v kwargs against learn() (and the network builder)


def _network_builder(network: Any) -> Callable[..., Any]:
    """The builder registered as ``network`` (None: "mlp"); UsageError for a name the registry lacks."""
    from common.models import (
        get_network_builder,  # imports TensorFlow: only when a check needs it
    )

    try:
        return get_network_builder(network if network is not None else "mlp")
    except ValueError as e:
        raise UsageError(str(e)) from e


def _named_params(fn: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    return {
        name: p for name, p in inspect.signature(fn).parameters.items()
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }


def _has_var_keyword(fn: Callable[..., Any]) -> bool:
    return any(p.kind == p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())


def _expected_type(fn: Callable[..., Any], param: inspect.Parameter) -> Any:
    """The annotation of ``param`` (resolved), else the type of its default, else None (anything).

    An unannotated float default also accepts strings (schedule specs like "lin_1e-3"); annotate the
    parameter ``float`` to make the check strict.
    """
    try:
        hints = typing.get_type_hints(fn)
    except (NameError, TypeError, AttributeError):  # unresolvable annotations: use defaults
        hints = {}
    if param.name in hints:
        return hints[param.name]
    default = param.default
    if default is inspect.Parameter.empty or default is None or callable(default):
        return None
    if type(default) is float:  # unannotated float: numbers, or a schedule spec such as "lin_1e-3"
        return float | str
    return type(default) if type(default) in (bool, int, str) else None


def _fits(value: Any, tp: Any) -> bool:
    """Whether ``value`` (from literal_eval) is acceptable for annotation/type ``tp``."""
    if tp is None or tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arm) for arm in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    from collections.abc import Callable as AbcCallable

    if tp is AbcCallable or origin is AbcCallable:
        return callable(value)
    if origin in (list, tuple, dict, set):
        return isinstance(value, origin)
    if isinstance(tp, type) and tp in (list, tuple, dict, set):
        return isinstance(value, tp)
    return True


def _describe(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any) -> Any:
    """1e6-style floats for int parameters become ints (baselines users write --nsteps=1e3)."""
    if isinstance(value, float) and value.is_integer() and not _fits(value, tp) and _fits(int(value), tp):
        return int(value)
    return value


def check_learn_kwargs(alg: str, learn: Callable[..., Any], kwargs: dict[str, Any],
                       network: Any = None, given: set[str] | None = None) -> dict[str, Any]:
    """Check kwargs for ``learn`` by name and type; returns them with integral floats made ints.

    Args:
        alg: the algorithm name (for messages).
        learn: the learn function.
        kwargs: hyperparameters (defaults and user overrides) without env/network/total_timesteps/seed.
        network: the network name; its builder's parameters are accepted when learn has ``**kwargs``.
        given: the names the user typed (only those are reported as "unknown"; others come from defaults).

    Raises:
        UsageError: an unknown name (with close matches) or a value of the wrong type.
    """
    params = _named_params(learn)
    builder = _network_builder(network) if _has_var_keyword(learn) else None
    net_params = _named_params(builder) if builder is not None else {}
    out = {}
    for key, value in kwargs.items():
        if key in params:
            tp, owner = _expected_type(learn, params[key]), learn
        elif key in net_params:
            tp, owner = _expected_type(builder, net_params[key]), None
        else:
            choices = list(params) + list(net_params)
            hint = _close(key, choices)
            hint = f"; close matches: {hint}" if hint else f"; it accepts: {', '.join(sorted(choices))}"
            source = "" if given is None or key in given else " (from the defaults file)"
            raise UsageError(f"algorithm '{alg}' does not accept --{key}{source}{hint}")
        value = _coerce(value, tp)
        if not _fits(value, tp):
            where = "" if owner is not None else " (network parameter)"
            raise UsageError(f"--{key}{where} expects {_describe(tp)}, got {type(value).__name__} {value!r}")
        out[key] = value
    return out


def check_network(network: Any) -> None:
    """Raise UsageError when ``network`` is a name the networks registry does not know."""
    if network is None or callable(network):
        return
    _network_builder(network)


# ---------------------------------------------------------------------------------------------
# paths


def check_writable_file(path: str, flag: str) -> str:
    """Make sure a file can be written at ``path`` (creating its folder); returns the absolute path."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path} is a folder; give a file name such as {os.path.join(path, 'model.zip')}")
    check_writable_dir(os.path.dirname(path), flag)
    return path


def check_writable_dir(folder: str, flag: str) -> str:
    """Create ``folder`` if needed and check a file can be written in it; returns the absolute path."""
    folder = os.path.abspath(os.path.expanduser(folder))
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".runner-write-test-"):
            pass
    except OSError as e:
        raise UsageError(f"{flag} {folder}: cannot write there ({e.strerror or e})") from e
    return folder

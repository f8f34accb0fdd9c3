"""Glue for run.py: find the env type, the algorithm, its defaults, and check the user's kwargs.

Nothing here imports TensorFlow: algorithms import it themselves when they are loaded.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import tempfile
import types
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym

from algos.base import ALIASES, algorithm_names
from common.errors import UserError, close_words
from common.files.model_file import is_special_file, mode_kind, special_file_kind
from common.minatar_envs import INSTALL_LINE as MINATAR_INSTALL_LINE
from common.minatar_envs import looks_minatar, register_minatar_envs
from common.robotics_envs import INSTALL_LINE, looks_robotics, register_robotics_envs
from common.wrappers.atari_wrappers import register_atari_envs

ALGOS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "algos")
ATARI_PREFIXES = ("ALE/",)


class UsageError(UserError):
    """A mistake in the command line or the arguments of ``run.main``; the message is one line."""


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
    alg = check_algorithm_name(alg)
    modname = f"algos.{alg}.{submodule or alg}"
    mod = _import_missing_ok(modname)
    if mod is None:
        raise UsageError(f"algorithm '{alg}' has no module {modname}")
    return mod


def check_algorithm_name(alg: str) -> str:
    """``alg`` (an alias such as ``trpo_mpi`` made its algorithm's name) when it is an algorithm of this
    project; else UsageError listing the known ones."""
    alg = ALIASES.get(alg, alg)
    known = algorithm_names()
    if alg not in known:
        hint = close_words(alg, known)
        hint = f" (did you mean {hint}?)" if hint else ""
        raise UsageError(f"unknown algorithm '{alg}'{hint}; known: {', '.join(known) or 'none'}")
    return alg


def get_learn_function(alg: str) -> Callable[..., Any]:
    """``learn`` of ``alg``; for ``package.module:function`` that function."""
    mod = get_alg_module(alg)
    fname = alg.split(":", 1)[1] if ":" in alg else "learn"
    fn = getattr(mod, fname, None)
    if not callable(fn):
        raise UsageError(f"algorithm '{alg}' has no function '{fname}' in {mod.__name__}")
    return fn


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


def registered_env_id(env_id: str) -> bool:
    """Whether ``env_id`` is registered with gymnasium without importing any module of a user's (gymnasium's
    own envs and this project's ``envs``)."""
    _import_missing_ok("envs")
    return env_id in gym.registry


def get_env_type(env_id: str, env_type: str | None = None) -> tuple[str, str]:
    """Resolve ``env_id`` (optionally ``module:EnvId``) to ``(env_type, env_id)``.

    ``module:EnvId`` imports the module first (it registers the env); ``env_type`` overrides the
    detected type. The project's own ``envs`` package is always imported.

    Raises:
        UsageError: the module does not import, or the env id is not registered (with close ids).
    """
    if not env_id:
        raise UsageError("no env given; pass --env=ENV_ID (for example --env=CartPole-v1)")
    from common.games import parallel

    if parallel.is_parallel_spec(env_id):  # a PettingZoo parallel env: one row per agent, one shared policy
        return parallel.ENV_TYPE, parallel.env_name(env_id)
    if env_id.startswith("pettingzoo."):  # a PettingZoo env played through common.games.SelfPlayEnv
        from common.games.pettingzoo import env_name

        return "pettingzoo", env_name(env_id)
    if ":" in env_id:
        modname, env_id = env_id.split(":", 1)
        try:
            importlib.import_module(modname)
        except ImportError as e:
            raise UsageError(f"module '{modname}' (from --env={modname}:{env_id}) does not import: {e}") from e
    _import_missing_ok("envs")
    if env_id not in gym.registry and _looks_atari(env_id) and not register_atari_envs():
        raise UsageError(f"env '{env_id}' looks like an Atari env, which needs ale-py: pip install ale-py")
    if env_id not in gym.registry and looks_robotics(env_id) and not register_robotics_envs():
        raise UsageError(f"env '{env_id}' is a gymnasium-robotics env, an optional extra: {INSTALL_LINE}")
    if env_id not in gym.registry and looks_minatar(env_id) and not register_minatar_envs():
        raise UsageError(f"env '{env_id}' is a MinAtar env, an optional extra: {MINATAR_INSTALL_LINE}")
    if env_id not in gym.registry:
        hint = close_words(env_id, list(gym.registry), n=5)
        hint = f"; closest registered ids: {hint}" if hint else ""
        raise UsageError(f"unknown env id '{env_id}'{hint} (use module:EnvId to import a module that registers it)")
    return (env_type or env_type_of_spec(gym.spec(env_id))), env_id


# ---------------------------------------------------------------------------------------------
# paths


def check_utf8_path(path: str, flag: str) -> None:
    """UsageError when ``path`` holds bytes that are not UTF-8 (surrogates from a non-UTF-8 argv): the logs
    and config.json that name it are UTF-8 text."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise UsageError(f"{flag} {shown}: the name is not valid UTF-8; give a UTF-8 name") from None


def check_writable_file(path: str, flag: str) -> str:
    """Make sure a file can be written at ``path`` (creating its folder); returns the absolute path."""
    check_utf8_path(path, flag)
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path} is a folder; give a file name such as {os.path.join(path, 'model.zip')}")
    if is_special_file(path):
        raise UsageError(f"{flag} {path} is {special_file_kind(path, follow_links=False)}, not a regular file; "
                         "give another name")
    check_writable_dir(os.path.dirname(path), flag)
    if not os.path.lexists(path):  # the name itself: too long for the file system, not allowed there
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.unlink(path)
        except FileExistsError:
            pass
        except OSError as e:
            raise UsageError(f"{flag} {path}: cannot write a file of that name ({e.strerror or e})") from e
    return path


MAX_TEXT_FILE_BYTES = 2**20  # a --hyperparams file, a log folder's config.json


def check_regular_file(path: str, flag: str) -> None:
    """UsageError naming ``flag`` when something other than a regular file (or a link to one) is at
    ``path``: a folder, a FIFO, a device."""
    _refuse_kind(special_file_kind(path, follow_links=True), path, flag)


def _refuse_kind(kind: str | None, path: str, flag: str) -> None:
    if kind:
        raise UsageError(f"{flag} {path} is {kind}, not a regular file")


def read_small_file(path: str, flag: str, max_bytes: int = MAX_TEXT_FILE_BYTES) -> bytes:
    """The bytes of the regular file at ``path``; UsageError naming ``flag`` when it cannot be read, is not
    a regular file (never waited on nor read) or holds more than ``max_bytes``."""
    check_regular_file(path, flag)
    try:  # non-blocking, checked again once open: a FIFO put there since the check is neither waited on nor read
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY), "rb") as f:
            _refuse_kind(mode_kind(os.fstat(f.fileno()).st_mode), path, flag)
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot read it ({e.strerror or e})") from None
    if len(data) > max_bytes:
        raise UsageError(f"{flag} {path} is larger than {max_bytes} bytes; not read")
    return data


def check_writable_dir(folder: str, flag: str) -> str:
    """Create ``folder`` if needed and check a file can be written in it; returns the absolute path."""
    check_utf8_path(folder, flag)
    folder = os.path.abspath(os.path.expanduser(folder))
    with writing_into(folder, flag):
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".runner-write-test-"):
            pass
    return folder


@contextlib.contextmanager
def writing_into(folder: str | None, flag: str) -> Iterator[None]:
    """Within the block, an OSError (a full disk, no permission) is a UsageError naming ``flag`` and ``folder``:
    for the writes a run makes before training."""
    try:
        yield
    except OSError as e:
        raise UsageError(f"{flag} {folder}: cannot write there ({e.strerror or e})") from e


def file_name(text: str) -> str:
    """``text`` as one file name: each character other than letters, digits, ``.``, ``_`` and ``-`` made ``-``
    (``ALE/Pong-v5`` -> ``ALE-Pong-v5``)."""
    return re.sub(r"[^\w.-]", "-", text).lstrip(".") or "-"


def numbered_log_dir(parent: str, name: str) -> str:
    """Make a new folder ``<parent>/<name>_<N>``, N one more than the highest taken there (rl-zoo's numbering,
    from 1), and return its absolute path; two runs starting together get two folders."""
    parent = os.path.abspath(parent)
    os.makedirs(parent, exist_ok=True)
    pattern = re.compile(re.escape(name) + r"_(\d+)")
    n = max((int(m.group(1)) for m in map(pattern.fullmatch, os.listdir(parent)) if m), default=0) + 1
    while True:
        path = os.path.join(parent, f"{name}_{n}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            n += 1


@contextlib.contextmanager
def claimed_log_dir(folder: str, training: bool) -> Iterator[None]:
    """Hold ``folder`` as this run's log folder for the block: UsageError when another run holds it, or
    when a training would write into a folder that already holds a run (its progress.csv would be lost)."""
    import fcntl

    folder = os.path.realpath(folder)
    with open(os.path.join(folder, ".runner.lock"), "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise UsageError(f"--log_path {folder} is in use by another run (pid {holder}); "
                             "use another folder") from None
        progress = os.path.join(folder, "progress.csv")
        if training and os.path.exists(progress) and os.path.getsize(progress) > 0:  # empty: nothing was logged
            raise UsageError(f"--log_path {folder} already holds a run (progress.csv); use a new folder or "
                             "remove it")
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield  # closing the file releases the lock

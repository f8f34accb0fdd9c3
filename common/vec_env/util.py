"""Helpers shared by the vectorized envs: observation layouts, image tiling, pickling, MPI vars."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium import spaces

from common.mpi.mpi_launch import MPI_ENV_PREFIXES

# One observation "key" per flat part: None for a plain space, str for Dict, int for Tuple.
ObsKey = str | int | None


def obs_space_info(space: gym.Space) -> tuple[list[ObsKey], dict[ObsKey, tuple[int, ...]], dict[ObsKey, np.dtype]]:
    """Split an observation space into flat array parts.

    Returns:
        keys (``[None]`` for a plain space, dict keys for Dict, indices for Tuple), shapes and dtypes per key.
    """
    if isinstance(space, spaces.Dict):
        subspaces: dict[ObsKey, gym.Space] = dict(space.spaces)
    elif isinstance(space, spaces.Tuple):
        subspaces = dict(enumerate(space.spaces))
    else:
        subspaces = {None: space}
    keys: list[ObsKey] = []
    shapes: dict[ObsKey, tuple[int, ...]] = {}
    dtypes: dict[ObsKey, np.dtype] = {}
    for key, sub in subspaces.items():
        if isinstance(sub, (spaces.Dict, spaces.Tuple)) or sub.shape is None or sub.dtype is None:
            raise TypeError(f"observation space {space} is not supported by vec envs: only Box, Discrete, "
                            "MultiDiscrete, MultiBinary and one level of Dict/Tuple of those; flatten it with "
                            "gymnasium.wrappers.FlattenObservation")
        keys.append(key)
        shapes[key] = tuple(sub.shape)
        dtypes[key] = np.dtype(sub.dtype)
    return keys, shapes, dtypes


def obs_to_dict(obs: Any) -> dict[ObsKey, Any]:
    """View one observation (array, dict or tuple) as a dict keyed like ``obs_space_info``."""
    if isinstance(obs, dict):
        return obs
    if isinstance(obs, tuple):
        return dict(enumerate(obs))
    return {None: obs}


def dict_to_obs(space: gym.Space, obs_dict: dict[ObsKey, np.ndarray]) -> Any:
    """Inverse of ``obs_to_dict`` for batched parts: array, dict of arrays or tuple of arrays."""
    if isinstance(space, spaces.Dict):
        return dict(obs_dict)
    if isinstance(space, spaces.Tuple):
        return tuple(obs_dict[i] for i in range(len(obs_dict)))
    return obs_dict[None]


class BadObservationError(ValueError):
    """An env returned an observation that does not fit its observation space; the message starts with
    'returned' (it follows 'env <i> ')."""


class BadSpaceError(TypeError):
    """An env whose observation or action space is not a gymnasium Space; the message starts with 'has'
    (it follows 'env <i> ')."""


def check_env_spaces(env: Any) -> None:
    """BadSpaceError unless ``env``'s observation and action spaces are gymnasium Spaces that vec envs can
    batch (``obs_space_info``)."""
    for name in ("observation_space", "action_space"):
        space = getattr(env, name, None)
        if not isinstance(space, gym.Space):
            raise BadSpaceError(f"has an {name} of type {type(space).__name__}, not a gymnasium.spaces.Space")
    obs_space_info(env.observation_space)


def write_obs(buffers: dict[ObsKey, np.ndarray], index: int, obs: Any) -> None:
    """Store one env's observation at ``index`` of batched ``buffers`` keyed like ``obs_space_info``:
    the array itself for a single-part space, else each part of the dict or tuple in its buffer."""
    single = buffers.get(None)
    if single is not None:
        store_obs(single, index, obs, "")
        return
    try:
        parts = obs if isinstance(obs, dict) else dict(enumerate(obs))
        for key in buffers:
            parts[key]
    except (TypeError, KeyError) as e:
        raise BadObservationError(f"returned an observation of type {type(obs).__name__} without the parts "
                         f"{list(buffers)} of its observation space ({e!r})") from None
    for key, buffer in buffers.items():
        store_obs(buffer, index, parts[key], f" part {key!r}")


def store_obs(buffer: np.ndarray, index: int, obs: Any, part: str = "") -> None:
    """``buffer[index] = obs``; a BadObservationError naming both shapes and dtypes when ``obs`` does not fit."""
    try:
        buffer[index] = obs
    except (ValueError, TypeError) as e:
        arr = np.asarray(obs)
        raise BadObservationError(f"returned an observation{part} of shape {arr.shape} and dtype {arr.dtype}; its observation "
                         f"space holds shape {buffer.shape[1:]} and dtype {buffer.dtype} ({e})") from None


def describe_failure(error: BaseException) -> str:
    """What an env did, for one-line errors: 'raised RuntimeError: boom' or 'called sys.exit(3)'."""
    if isinstance(error, (BadObservationError, BadSpaceError)):
        return str(error)
    if isinstance(error, SystemExit):
        return f"called sys.exit({error.code!r})"
    text = str(error).strip().splitlines()
    return f"raised {type(error).__name__}" + (f": {text[0]}" if text else "")


def alloc_obs_buffers(space: gym.Space, num_envs: int) -> dict[ObsKey, np.ndarray]:
    """Zeroed batched buffers, one per flat part of ``space``."""
    keys, shapes, dtypes = obs_space_info(space)
    return {k: np.zeros((num_envs, *shapes[k]), dtype=dtypes[k]) for k in keys}


def copy_obs(space: gym.Space, buffers: dict[ObsKey, np.ndarray]) -> Any:
    """A copy of the batched observation held in ``buffers``, shaped like ``space``."""
    return dict_to_obs(space, {k: v.copy() for k, v in buffers.items()})


def tile_images(images: list[np.ndarray] | np.ndarray) -> np.ndarray:
    """Tile N images (H, W, C) into one near-square grid image, padding with black.

    Returns:
        an array of shape (rows * H, cols * W, C).
    """
    arr = np.asarray(images)
    if arr.ndim != 4:
        raise ValueError(f"tile_images expects N images of shape (H, W, C), got an array of shape {arr.shape}")
    n, h, w, c = arr.shape
    rows = int(np.ceil(np.sqrt(n)))
    cols = int(np.ceil(n / rows))
    pad = np.zeros((rows * cols - n, h, w, c), dtype=arr.dtype)
    arr = np.concatenate([arr, pad], axis=0)
    return arr.reshape(rows, cols, h, w, c).transpose(0, 2, 1, 3, 4).reshape(rows * h, cols * w, c)


class CloudpickleWrapper:
    """Pickles its content with cloudpickle, so lambdas and closures can be sent to worker processes."""

    def __init__(self, x: Any) -> None:
        self.x = x

    def __getstate__(self) -> bytes:
        return cloudpickle.dumps(self.x)

    def __setstate__(self, state: bytes) -> None:
        self.x = cloudpickle.loads(state)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.x(*args, **kwargs)


def _is_mpi_var(name: str) -> bool:
    return name.startswith(MPI_ENV_PREFIXES)


def remove_mpi_env_vars() -> dict[str, str]:
    """Delete MPI launcher variables from ``os.environ``; returns what was removed."""
    removed = {k: v for k, v in os.environ.items() if _is_mpi_var(k)}
    for k in removed:
        del os.environ[k]
    return removed


@contextlib.contextmanager
def clear_mpi_env_vars() -> Iterator[None]:
    """Context manager removing OMPI_*, PMI_*, MPI_*, HYDRA_* vars while inside, so that child
    processes started there do not believe they are MPI ranks; restores them on exit."""
    removed = remove_mpi_env_vars()
    try:
        yield
    finally:
        os.environ.update(removed)


def is_wrapped(env: gym.Env, wrapper_class: type) -> bool:
    """Whether any layer of the gymnasium wrapper chain of ``env`` is a ``wrapper_class``."""
    current: Any = env
    while current is not None:
        if isinstance(current, wrapper_class):
            return True
        current = getattr(current, "env", None) if isinstance(current, gym.Wrapper) else None
    return False


def get_env_attr(env: gym.Env, name: str) -> Any:
    """Attribute ``name`` from the outermost wrapper or env that has it."""
    return env.get_wrapper_attr(name)


def set_env_attr(env: gym.Env, name: str, value: Any) -> None:
    """Set ``name`` on the wrapper or env that already has it (else on the outermost)."""
    env.set_wrapper_attr(name, value)


def call_env_method(env: gym.Env, name: str, args: tuple, kwargs: dict) -> Any:
    """Call method ``name`` found along the wrapper chain."""
    return env.get_wrapper_attr(name)(*args, **kwargs)


def check_env_fns(env_fns: list[Callable[[], gym.Env]]) -> None:
    """Refuse env factories that all hand out the same captured env instance (``lambda: env``).

    Only closures are inspected (their captured cells); factories that fetch a shared env some
    other way (globals, attributes) are caught later by comparing the returned objects.
    """
    if not env_fns:
        raise ValueError("need at least one env factory; got an empty env_fns list")
    seen: dict[int, int] = {}
    for i, fn in enumerate(env_fns):
        if not callable(fn):
            raise TypeError(f"env_fns[{i}] is {type(fn).__name__}, not a callable that builds an env; "
                            "pass e.g. [lambda: gymnasium.make('CartPole-v1')] * n")
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                content = cell.cell_contents
            except ValueError:
                continue
            if isinstance(content, gym.Env):
                j = seen.setdefault(id(content), i)
                if j != i:
                    raise ValueError(same_instance_message(j, i))


def same_instance_message(i: int, j: int) -> str:
    """The one-line error for env factories sharing one env instance."""
    return (f"env_fns[{i}] and env_fns[{j}] return the same env instance; each slot needs its own env: "
            "write `lambda: gymnasium.make(env_id)`, not `lambda: env`")

"""Batched numpy arrays living in one anonymous shared memory block (memfd), shared with workers by
passing the file descriptor over a Unix socket: no names, no resource tracker, freed with the last user."""

from __future__ import annotations

import mmap
import os
import tempfile
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from common.vec_env.util import ObsKey, obs_space_info

_ALIGN = 64
SHM_ACTION_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


@dataclass(frozen=True)
class ArraySpec:
    """One array of the block: its name, byte offset, shape and dtype string."""

    name: tuple[str, ObsKey]
    offset: int
    shape: tuple[int, ...]
    dtype: str


def plan_layout(num_envs: int, observation_space: gym.Space, action_space: gym.Space) -> tuple[list[ArraySpec], int]:
    """Place obs parts, rewards, dones and (for simple action spaces) actions in one block.

    Returns:
        the array specs and the total size in bytes.
    """
    keys, shapes, dtypes = obs_space_info(observation_space)
    items: list[tuple[tuple[str, ObsKey], tuple[int, ...], np.dtype]] = [
        (("obs", k), (num_envs, *shapes[k]), dtypes[k]) for k in keys]
    items += [(("rew", None), (num_envs,), np.dtype(np.float32)), (("done", None), (num_envs,), np.dtype(bool))]
    if isinstance(action_space, SHM_ACTION_SPACES):
        items.append((("act", None), (num_envs, *action_space.shape), np.dtype(action_space.dtype)))
    specs, offset = [], 0
    for name, shape, dtype in items:
        specs.append(ArraySpec(name, offset, shape, dtype.str))
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        offset += -(-max(nbytes, 1) // _ALIGN) * _ALIGN
    return specs, max(offset, _ALIGN)


def create_block(size: int) -> tuple[int, mmap.mmap]:
    """A new zeroed shared block of ``size`` bytes: (file descriptor, mapping)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("vec_env", os.MFD_CLOEXEC)
    else:  # pragma: no cover - macOS and other systems without memfd
        fd, path = tempfile.mkstemp(prefix="vec_env_")
        os.unlink(path)
    os.ftruncate(fd, size)
    return fd, mmap.mmap(fd, size)


def map_block(fd: int, size: int) -> mmap.mmap:
    """Map a block received from another process and close the descriptor."""
    try:
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def views(block: mmap.mmap, specs: list[ArraySpec]) -> dict[tuple[str, ObsKey], np.ndarray]:
    """Numpy arrays viewing ``block`` as laid out by ``plan_layout``."""
    out = {}
    for s in specs:
        count = int(np.prod(s.shape, dtype=np.int64))
        out[s.name] = np.frombuffer(block, dtype=np.dtype(s.dtype), count=count, offset=s.offset).reshape(s.shape)
    return out

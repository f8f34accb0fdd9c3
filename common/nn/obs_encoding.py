"""Observation encoding: raw vec-env observations to one network-input array per batch (numpy).

``ObsEncoder`` maps Discrete -> one-hot, MultiDiscrete -> one-hot per component, MultiBinary -> float,
Dict/Tuple -> flattened and concatenated, Box -> float32 (uint8 images are kept as uint8 and scaled by
1/255 by the model that reads them). ``MultiInputEncoder`` keeps a Dict's image keys apart for the
off-policy actor-critics' per-key networks (``algos.offpolicy.actor_critic``).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike


class ObsEncoder:
    """Numpy encoder from raw vec-env observations to a network input batch."""

    def __init__(self, space: spaces.Space):
        self.space = space
        self.is_image = (
            isinstance(space, spaces.Box) and space.dtype == np.uint8 and len(space.shape) in (2, 3)
        )
        if self.is_image:
            self.shape, self.dtype = tuple(space.shape), np.dtype(np.uint8)
        elif isinstance(space, spaces.Box):
            self.shape, self.dtype = tuple(space.shape), np.dtype(np.float32)
        else:
            self.shape, self.dtype = (self._flat_size(space),), np.dtype(np.float32)
        self._fn = self._make(space)

    @classmethod
    def _flat_size(cls, space) -> int:
        if isinstance(space, spaces.Discrete):
            return int(space.n)
        if isinstance(space, spaces.MultiDiscrete):
            return int(np.sum(space.nvec))
        if isinstance(space, (spaces.Box, spaces.MultiBinary)):
            return int(np.prod(space.shape))
        if isinstance(space, spaces.Dict):
            return sum(cls._flat_size(s) for s in space.spaces.values())
        if isinstance(space, spaces.Tuple):
            return sum(cls._flat_size(s) for s in space.spaces)
        raise TypeError(f"unsupported observation space {space}")

    def _make(self, space) -> Callable[[object], np.ndarray]:
        if isinstance(space, spaces.Discrete):
            eye, start = np.eye(int(space.n), dtype=np.float32), int(space.start)
            return lambda o: eye[np.asarray(o, np.int64).reshape(-1) - start]
        if isinstance(space, spaces.MultiDiscrete):
            nvec = np.asarray(space.nvec).ravel()
            offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
            total, start = int(nvec.sum()), np.asarray(space.start).ravel()

            def one_hot_multi(o: ArrayLike) -> np.ndarray:
                o = np.asarray(o, np.int64).reshape(-1, len(nvec)) - start + offsets
                out = np.zeros((len(o), total), np.float32)
                np.put_along_axis(out, o, 1.0, axis=1)
                return out

            return one_hot_multi
        if isinstance(space, (spaces.Box, spaces.MultiBinary)) and not isinstance(space, spaces.Dict):
            if self.is_image and space is self.space:
                return lambda o: np.asarray(o, np.uint8)
            if space is self.space:
                return lambda o: np.asarray(o, np.float32)
            size = int(np.prod(space.shape))
            return lambda o: np.asarray(o, np.float32).reshape(-1, size)
        if isinstance(space, spaces.Dict):
            parts = [(k, self._make_flat(s)) for k, s in space.spaces.items()]
            return lambda o: np.concatenate([f(o[k]) for k, f in parts], axis=1)
        if isinstance(space, spaces.Tuple):
            parts = [self._make_flat(s) for s in space.spaces]
            return lambda o: np.concatenate([f(o[i]) for i, f in enumerate(parts)], axis=1)
        raise TypeError(f"unsupported observation space {space}; use Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple")

    def _make_flat(self, space):
        fn = self._make(space)
        if isinstance(space, (spaces.Box, spaces.MultiBinary)):
            size = int(np.prod(space.shape))
            return lambda o: np.asarray(o, np.float32).reshape(-1, size)
        return fn

    def __call__(self, obs) -> np.ndarray:
        """Encode a batch (leading env axis) of raw observations."""
        return self._fn(obs)

    def encode_list(self, items: list) -> np.ndarray:
        """Encode a list of single (unbatched) raw observations, e.g. terminal observations."""
        if isinstance(self.space, spaces.Dict):
            return self._fn({k: np.stack([o[k] for o in items]) for k in self.space.spaces})
        if isinstance(self.space, spaces.Tuple):
            return self._fn(tuple(np.stack([o[i] for o in items]) for i in range(len(self.space.spaces))))
        return self._fn(np.stack([np.asarray(o) for o in items]))


VECTOR, IMAGES = "vector", "images"  # the parts of a multi-input encoding


def image_keys(space: spaces.Dict) -> tuple[str, ...]:
    """The keys of ``space`` holding images (uint8 Box of 2 or 3 dims, as ``ObsEncoder.is_image`` says)."""
    return tuple(k for k, s in space.spaces.items() if ObsEncoder(s).is_image)


class MultiInputEncoder:
    """Numpy encoder of a Dict observation that keeps its image keys apart (stable-baselines3's
    CombinedExtractor split): without image keys it is ``ObsEncoder(space)`` (every key flattened and
    concatenated in the space's key order); with them a batch becomes ``{"vector": float32 [N, vector_dim]
    (the other keys flattened and concatenated), "images": {key: uint8 [N, *shape]}}``."""

    is_image = False

    def __init__(self, space: spaces.Dict):
        self.space = space
        self.image_shapes = {k: tuple(space.spaces[k].shape) for k in image_keys(space)}
        self._flat = ObsEncoder(space)
        self._vectors = [(k, ObsEncoder(s)) for k, s in space.spaces.items() if k not in self.image_shapes]
        self.vector_dim = sum(int(np.prod(e.shape)) for _, e in self._vectors)
        self.shape, self.dtype = (self.vector_dim,), np.dtype(np.float32)

    def __call__(self, obs) -> np.ndarray | dict:
        """Encode a batch (leading env axis) of raw Dict observations."""
        if not self.image_shapes:
            return self._flat(obs)
        images = {k: np.asarray(obs[k], np.uint8) for k in self.image_shapes}
        n = len(next(iter(images.values())))
        parts = [e(obs[k]).reshape(n, -1) for k, e in self._vectors]
        vector = np.concatenate(parts, axis=1) if parts else np.zeros((n, 0), np.float32)
        return {VECTOR: vector, IMAGES: images}

    def encode_list(self, items: list) -> np.ndarray | dict:
        """Encode a list of single (unbatched) raw Dict observations, e.g. terminal observations."""
        return self({k: np.stack([o[k] for o in items]) for k in self.space.spaces})

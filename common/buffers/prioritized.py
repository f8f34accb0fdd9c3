"""Prioritized experience replay (Schaul et al. 2016, proportional variant) on top of ``ReplayBuffer``.

Row ``i`` is sampled with probability ``p_i ** alpha / sum_k p_k ** alpha``; new rows get the largest
priority seen so far. Sampling is stratified like baselines (batch row ``j`` draws its mass from the
``j``-th of ``batch`` equal slices of the total) and fully vectorised: any number of batches are drawn in
one call, e.g. ``sample((gradient_steps, batch), rng, beta)``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from common.buffers.replay import ReplayBuffer
from common.buffers.segment_tree import MinSegmentTree, SumSegmentTree

WEIGHT_NORMALISATIONS = ("buffer", "batch")  # what importance weights are divided by (``importance_weights``)


class PrioritizedReplayBuffer(ReplayBuffer):
    """A ``ReplayBuffer`` that samples rows in proportion to their priority.

    Args:
        args, kwargs: the storage, as ``ReplayBuffer`` (size, obs_shape, action_shape, obs_dtype, action_dtype, extras).
        alpha: how much prioritization is used (0: uniform, 1: fully proportional); keyword only.
    """

    ROW_OVERHEAD = 64  # the sum and min trees: float64 nodes, up to 4 per row each

    def __init__(self, *args: Any, alpha: float = 0.6, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not alpha >= 0:
            raise ValueError(f"prioritized replay alpha must be >= 0, got {alpha}")
        self.alpha = float(alpha)
        self._sum = SumSegmentTree(self.capacity)
        self._min = MinSegmentTree(self.capacity)
        self.max_priority = 1.0

    def state(self) -> dict[str, Any]:
        """The stored transitions with their priorities (both segment trees) and the largest priority."""
        return {**super().state(), "sum_tree": self._sum._value, "min_tree": self._min._value,
                "max_priority": self.max_priority}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state`` returned."""
        super().load_state(state)
        self._sum._value[...] = state["sum_tree"]
        self._min._value[...] = state["min_tree"]
        self.max_priority = float(state["max_priority"])

    def add(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray, next_obs: np.ndarray, dones: np.ndarray,
            **extras: np.ndarray) -> np.ndarray:
        """Store a batch of transitions with the maximal priority; returns their row indices."""
        idx = super().add(obs, actions, rewards, next_obs, dones, **extras)
        p = self.max_priority**self.alpha
        self._sum[idx] = p
        self._min[idx] = p
        return idx

    def sample_indices(self, batch_size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Row indices drawn in proportion to priority; ``batch_size`` is an int or a shape (..., batch)."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        shape = (batch_size,) if np.ndim(batch_size) == 0 else tuple(batch_size)
        b = shape[-1]
        total = self._sum.sum()
        mass = (rng.random(shape) + np.arange(b)) * (total / b)
        idx = self._sum.find_prefixsum_idx(mass)
        return np.minimum(idx, self._size - 1)

    def importance_weights(self, idx: np.ndarray, beta: float, normalise: str = "buffer") -> np.ndarray:
        """``(N * P(i)) ** -beta`` (float32, shape of ``idx``) divided by the largest weight any stored row has
        (``normalise="buffer"``, Schaul et al. and baselines) or by the largest in each batch, the last axis of
        ``idx`` (``"batch"``, Dopamine: the weights' scale then does not shrink as the rarest row's priority
        falls)."""
        if normalise not in WEIGHT_NORMALISATIONS:
            words = " or ".join(repr(w) for w in WEIGHT_NORMALISATIONS)
            raise ValueError(f"importance weights are normalised by {words}, got {normalise!r}")
        total = self._sum.sum()
        weights = (self._sum[idx] / total * self._size) ** (-beta)
        if normalise == "batch":
            return (weights / weights.max(axis=-1, keepdims=True)).astype(np.float32)
        max_weight = (self._min.min() / total * self._size) ** (-beta)
        return (weights / max_weight).astype(np.float32)

    def sample(self, batch_size: int | tuple[int, ...], rng: np.random.Generator,
               beta: float = 0.4, normalise: str = "buffer") -> dict[str, np.ndarray]:
        """Prioritized sample: the rows plus ``weights`` (importance weights, see ``importance_weights``) and
        ``indices``."""
        if beta < 0:
            raise ValueError(f"prioritized replay beta must be >= 0, got {beta}")
        idx = self.sample_indices(batch_size, rng)
        batch = self.gather(idx)
        batch["weights"] = self.importance_weights(idx, beta, normalise)
        batch["indices"] = idx
        return batch

    def update_priorities(self, idx: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities of rows ``idx`` (any shape; for a repeated row the last value wins)."""
        idx = np.asarray(idx, dtype=np.int64).ravel()
        priorities = np.asarray(priorities, dtype=np.float64).ravel()
        if idx.shape != priorities.shape:
            raise ValueError(f"{idx.size} indices but {priorities.size} priorities")
        if priorities.size == 0:
            return
        if not np.all(np.isfinite(priorities)) or priorities.min() <= 0:
            raise ValueError("priorities must be positive and finite (add a small epsilon to |TD error|)")
        if idx.min() < 0 or idx.max() >= self._size:
            raise IndexError(f"priority index out of range [0, {self._size})")
        p = priorities**self.alpha
        self._sum[idx] = p
        self._min[idx] = p
        self.max_priority = max(self.max_priority, float(priorities.max()))

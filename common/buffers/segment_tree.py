"""Sum and min segment trees over a fixed number of leaves, with vectorised numpy updates and queries.

The tree lives in one float64 array of ``2 * capacity`` slots: the root is slot 1, node ``i`` has children
``2i`` and ``2i + 1``, leaf ``j`` is slot ``capacity + j``. ``capacity`` is rounded up to a power of two;
leaves beyond the requested size hold the operation's neutral element.
"""
from __future__ import annotations

import operator
from collections.abc import Callable

import numpy as np


class SegmentTree:
    """A complete binary tree whose inner nodes hold ``operation`` of their children.

    Args:
        capacity: number of leaves (rounded up to a power of two internally).
        operation: an associative, vectorised numpy binary function (``np.add``, ``np.minimum``).
        neutral_element: ``operation(x, neutral_element) == x``.
        scalar_operation: the same operation on two floats (fast path for single-leaf updates).
    """

    def __init__(self, capacity: int, operation: Callable[[np.ndarray, np.ndarray], np.ndarray],
                 neutral_element: float, scalar_operation: Callable[[float, float], float] | None = None) -> None:
        if int(capacity) <= 0:
            raise ValueError(f"segment tree capacity must be positive, got {capacity}")
        self.size = int(capacity)
        self.capacity = 1 << (self.size - 1).bit_length()
        self._op = operation
        self._scalar_op = scalar_operation
        self._neutral = float(neutral_element)
        self._value = np.full(2 * self.capacity, self._neutral, dtype=np.float64)

    def _check(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self.size):
            raise IndexError(f"segment tree index out of range [0, {self.size}): {idx.min()}..{idx.max()}")
        return idx

    def __setitem__(self, idx, value) -> None:
        """Set leaves ``idx`` (int or array; for repeated indices the last value wins) and update the sums."""
        idx = self._check(idx).ravel()
        value = np.broadcast_to(np.asarray(value, dtype=np.float64), np.shape(idx) or (1,)).ravel()
        if idx.size == 0:
            return
        if idx.size == 1 and self._scalar_op is not None:  # one leaf (one env step): a plain walk up
            self._set_one(int(idx[0]), float(value[0]))
            return
        # keep the last occurrence of each index (numpy fancy assignment does not promise an order)
        rev_unique, rev_pos = np.unique(idx[::-1], return_index=True)
        nodes = rev_unique + self.capacity
        self._value[nodes] = value[::-1][rev_pos]
        while nodes[0] > 1:  # a parent listed twice gets the same value from the same children twice
            nodes = nodes >> 1
            self._value[nodes] = self._op(self._value[2 * nodes], self._value[2 * nodes + 1])

    def _set_one(self, i: int, value: float) -> None:
        v, op = self._value, self._scalar_op
        node = i + self.capacity
        v[node] = value
        node >>= 1
        while node >= 1:
            v[node] = op(v[2 * node], v[2 * node + 1])
            node >>= 1

    def __getitem__(self, idx):
        """Leaf values at ``idx`` (int or array)."""
        idx = self._check(idx)
        return self._value[self.capacity + idx]

    def reduce(self, start: int = 0, end: int | None = None) -> float:
        """``operation`` over the leaves ``start .. end-1`` (the whole tree by default)."""
        end = self.size if end is None else int(end)
        if end < 0:
            end += self.size
        if not 0 <= start <= end <= self.size:
            raise IndexError(f"bad segment tree range [{start}, {end}) for size {self.size}")
        if start == 0 and end >= self.size:
            return float(self._value[1])
        result = self._neutral
        lo, hi = start + self.capacity, end + self.capacity
        while lo < hi:
            if lo & 1:
                result = float(self._op(result, self._value[lo]))
                lo += 1
            if hi & 1:
                hi -= 1
                result = float(self._op(result, self._value[hi]))
            lo >>= 1
            hi >>= 1
        return result


class SumSegmentTree(SegmentTree):
    """Segment tree of sums; finds the leaf where a prefix sum is reached."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.add, 0.0, operator.add)

    def sum(self, start: int = 0, end: int | None = None) -> float:
        """Sum of leaves ``start .. end-1``."""
        return self.reduce(start, end)

    def find_prefixsum_idx(self, prefixsum: np.ndarray) -> np.ndarray:
        """For each ``p`` in ``prefixsum``: the smallest leaf ``i`` with ``sum(leaves[: i + 1]) > p``.

        Vectorised: all queries walk down the tree together, one numpy step per level. ``p`` should lie in
        ``[0, sum())``; larger values end on the last leaf with a non-zero path.
        """
        p = np.array(prefixsum, dtype=np.float64, copy=True)
        shape = p.shape
        p = p.ravel()
        node = np.ones(p.shape, dtype=np.int64)
        for _ in range(self.capacity.bit_length() - 1):
            left = 2 * node
            left_sum = self._value[left]
            go_left = left_sum > p
            p = np.where(go_left, p, p - left_sum)
            node = np.where(go_left, left, left + 1)
        return (node - self.capacity).reshape(shape)


class MinSegmentTree(SegmentTree):
    """Segment tree of minima."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.minimum, float("inf"), min)

    def min(self, start: int = 0, end: int | None = None) -> float:
        """Minimum of leaves ``start .. end-1``."""
        return self.reduce(start, end)

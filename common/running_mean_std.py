"""Running mean and variance of a stream of batches (parallel-variance algorithm)."""

from __future__ import annotations

import numpy as np


def merge_moments(mean_a: np.ndarray, var_a: np.ndarray, count_a: float, mean_b: np.ndarray,
                  var_b: np.ndarray | float, count_b: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(mean, var, count) of the union of two disjoint sample sets from theirs (Chan et al.'s parallel
    variance); ``count_a + count_b`` must not be 0."""
    delta = mean_b - mean_a
    total = count_a + count_b
    mean = mean_a + delta * (count_b / total)
    m2 = var_a * count_a + var_b * count_b + np.square(delta) * (count_a * count_b / total)
    return mean, m2 / total, total


class RunningMeanStd:
    """Mean and variance of every sample seen so far, merged batch by batch.

    Args:
        epsilon: initial pseudo-count, so that the first batch does not divide by zero.
        shape: shape of one sample.
    """

    def __init__(self, epsilon: float = 1e-4, shape: tuple[int, ...] = ()) -> None:
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = float(epsilon)

    @property
    def std(self) -> np.ndarray:
        """Standard deviation, sqrt(var)."""
        return np.sqrt(self.var)

    def update(self, x: np.ndarray) -> None:
        """Merge a batch of samples (leading axis = samples)."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape[1:] != self.mean.shape:
            raise ValueError(f"RunningMeanStd of shape {self.mean.shape} got a batch of shape {x.shape}; "
                             f"expected (batch, *{self.mean.shape})")
        if x.shape[0] == 0:
            return
        if x.shape[0] == 1:  # one env, every step: merge_moments with count_b = 1, var_b = 0, in fewer numpy calls
            self._add_one(x[0])
            return
        self.update_from_moments(x.mean(axis=0), x.var(axis=0), x.shape[0])

    def _add_one(self, x: np.ndarray) -> None:
        """``update_from_moments(x, 0.0, 1)`` in fewer numpy calls (mean and var stay float64 arrays)."""
        total = self.count + 1.0
        delta = x - self.mean
        self.mean = np.asarray(self.mean + delta / total)
        self.var = np.asarray((self.var + np.square(delta) / total) * (self.count / total))
        self.count = total

    def update_from_moments(self, batch_mean: np.ndarray, batch_var: np.ndarray | float, batch_count: float) -> None:
        """Merge the moments of a batch computed elsewhere (e.g. on another MPI rank)."""
        mean, var, total = merge_moments(self.mean, self.var, self.count, batch_mean, batch_var, batch_count)
        self.mean = np.asarray(mean, dtype=np.float64)
        self.var = np.asarray(var, dtype=np.float64)
        self.count = float(total)

"""Running mean and variance of a stream of batches (parallel-variance algorithm)."""

from __future__ import annotations

import numpy as np


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
        self.update_from_moments(x.mean(axis=0), x.var(axis=0), x.shape[0])

    def update_from_moments(self, batch_mean: np.ndarray, batch_var: np.ndarray, batch_count: float) -> None:
        """Merge the moments of a batch computed elsewhere (e.g. on another MPI rank)."""
        delta = batch_mean - self.mean
        total = self.count + batch_count
        new_mean = self.mean + delta * (batch_count / total)
        m2 = self.var * self.count + batch_var * batch_count + np.square(delta) * (self.count * batch_count / total)
        self.mean = np.asarray(new_mean, dtype=np.float64)
        self.var = np.asarray(m2 / total, dtype=np.float64)
        self.count = float(total)

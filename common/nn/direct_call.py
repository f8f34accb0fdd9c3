"""Calling a ``tf.function`` many times on small numpy inputs without its per-call dispatch.

A ``tf.function`` call matches its arguments against the traced signatures and converts them on every call:
on this project's 2-core machines that costs 0.3-1 ms for a call with 7 small numpy arguments, more than an
A2C update of a CartPole network computes (``bench/on_policy_update.py``'s polymorphic a2c case). ``DirectCall`` keeps
the concrete function of each argument signature and runs it on the converted tensors directly.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf


class DirectCall:
    """``DirectCall(tf_function)(*args)`` runs ``tf_function(*args)``; the arguments must be numpy arrays
    (numpy scalars included) or None. The concrete function of each signature (shapes, dtypes, None places)
    is looked up once; later calls skip the signature matching. Anything else (Python numbers, nested
    structures, a TensorFlow without the flat-call entry point) goes through the ordinary call."""

    def __init__(self, function: Any) -> None:
        self.function = function
        self._concrete: dict[tuple, Any] = {}

    def __call__(self, *args: np.ndarray | np.generic | None) -> Any:
        try:
            key = tuple(None if a is None else (a.shape, a.dtype.str) for a in args)
        except AttributeError:
            return self.function(*args)
        concrete = self._concrete.get(key)
        if concrete is None:
            concrete = self._concrete[key] = self._direct(args)
        if concrete is False:
            return self.function(*args)
        tensors = [tf.constant(a) for a in args if a is not None]
        return concrete._call_flat(tensors, concrete.captured_inputs)

    def _direct(self, args: tuple) -> Any:
        """The concrete function for ``args``, or False when it cannot be called flat with their tensors."""
        if not all(a is None or isinstance(a, (np.ndarray, np.generic)) for a in args):
            return False
        concrete = self.function.get_concrete_function(*args)
        n_tensors = sum(a is not None for a in args)
        flat_inputs = len(concrete.inputs) - len(concrete.captured_inputs)
        if not hasattr(concrete, "_call_flat") or flat_inputs != n_tensors:
            return False
        return concrete

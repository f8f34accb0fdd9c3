"""Wrappers for the runner's tests of ``--wrapper`` (``envs.wrappers:RewardOffset(offset=1.0)``) and benchmarks."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class RewardOffset(gym.Wrapper):
    """Adds ``offset`` to every reward, so tests can see the wrapper was applied (also in workers)."""

    def __init__(self, env: gym.Env, offset: float = 1.0) -> None:
        super().__init__(env)
        self.offset = float(offset)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, float(reward) + self.offset, terminated, truncated, info


class AllLegalMasks(gym.Wrapper):
    """Gives an ``action_masks()`` that allows every action of a Discrete space, so the runner masks (with
    nothing masked): the cost of mask handling alone (``bench/masking.py``)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._mask = np.ones(int(env.action_space.n), bool)
        self._mask.flags.writeable = False

    def action_masks(self) -> np.ndarray:
        """All True, one entry per action (the same read-only array each time, as a cheap env would give it)."""
        return self._mask

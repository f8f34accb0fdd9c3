"""A wrapper for MPI failure tests: ``--wrapper="tests.mpi_scripts.rank_fault:RankFault(rank=1, fault='raise')"``
misbehaves on one rank only (in-process envs: ``--vec_env=dummy``), at its env's 40th step:

- ``raise``: raises ``RuntimeError("rank fault: step 40")``;
- ``hang``: sleeps for an hour (a hung simulator);
- ``nan_reward``: returns a NaN reward.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym

from common.mpi import mpi_util


class RankFault(gym.Wrapper):
    """``fault`` at step ``at`` of the env on rank ``rank``; the others step normally."""

    def __init__(self, env: gym.Env, rank: int = 1, fault: str = "raise", at: int = 40) -> None:
        super().__init__(env)
        self.faulty = mpi_util.rank() == rank
        self.fault, self.at, self.steps = fault, at, 0

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.faulty and self.steps == self.at:
            if self.fault == "raise":
                raise RuntimeError(f"rank fault: step {self.steps}")
            if self.fault == "hang":
                time.sleep(3600)
            if self.fault == "nan_reward":
                reward = float("nan")
        return obs, reward, terminated, truncated, info

"""An env that misbehaves on purpose after a number of steps (for the runner's failure tests)."""

from __future__ import annotations

import sys
import time
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

FAULTS = ("raise", "exit", "hang", "bad_shape", "bad_dtype", "reset_raise")


class FaultyEnv(gym.Env):
    """A 4-float observation, 2 actions, reward 1 per step; step ``fail_at`` (counted over the env's life)
    does ``fault``:

    - ``raise``: raises ``RuntimeError("faulty env: step N")``;
    - ``exit``: calls ``sys.exit(3)``;
    - ``hang``: sleeps for an hour (a hung simulator);
    - ``bad_shape`` / ``bad_dtype``: returns an observation of shape (3,) / of strings;
    - ``reset_raise``: every ``reset`` raises ``RuntimeError`` (``fail_at`` unused).

    Args:
        fault: one of ``FAULTS``.
        fail_at: the env step (1-based) that misbehaves.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, fault: str = "raise", fail_at: int = 10) -> None:
        if fault not in FAULTS:
            raise ValueError(f"fault must be one of {', '.join(FAULTS)}, got {fault!r}")
        self.fault, self.fail_at, self.steps = fault, int(fail_at), 0
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if self.fault == "reset_raise":
            raise RuntimeError("faulty env: reset")
        return np.zeros(4, dtype=np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.steps += 1
        obs: Any = np.zeros(4, dtype=np.float32)
        if self.steps == self.fail_at:
            if self.fault == "raise":
                raise RuntimeError(f"faulty env: step {self.steps}")
            if self.fault == "exit":
                sys.exit(3)
            if self.fault == "hang":
                time.sleep(3600)
            if self.fault == "bad_shape":
                obs = np.zeros(3, dtype=np.float32)
            if self.fault == "bad_dtype":
                obs = np.array(["a", "b", "c", "d"])
        return obs, 1.0, False, False, {}

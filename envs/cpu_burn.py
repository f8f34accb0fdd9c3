"""An env whose step burns a fixed amount of CPU time (for vec-env benchmarks)."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class CpuBurnEnv(gym.Env):
    """Each step busy-loops until this thread has used ``burn_s`` seconds of CPU.

    CPU time (not wall time) is measured, so the work per step is the same however loaded the machine is.

    Args:
        burn_s: CPU seconds burnt per step.
        obs_dim: size of the (random) observation vector.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, burn_s: float = 1e-3, obs_dim: int = 4) -> None:
        if burn_s < 0:
            raise ValueError(f"burn_s must be >= 0 seconds, got {burn_s}")
        self.burn_s = float(burn_s)
        self.observation_space = spaces.Box(-1.0, 1.0, (obs_dim,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, self.observation_space.shape).astype(np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        deadline = time.thread_time() + self.burn_s
        while time.thread_time() < deadline:
            pass
        obs = self.np_random.uniform(-1, 1, self.observation_space.shape).astype(np.float32)
        return obs, float(action == 1), False, False, {}

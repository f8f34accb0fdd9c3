"""An env with a Dict observation: echo the "target" part, ignore the distracting "noise" part."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class DictObsEnv(gym.Env):
    """Observation {"target": Discrete(n), "noise": Box(-1, 1, (dim,))}; reward 1 when action == target.

    Args:
        n: number of target values (and actions).
        dim: size of the noise vector.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, n: int = 3, dim: int = 2) -> None:
        self.n, self.dim = int(n), int(dim)
        self.observation_space = spaces.Dict({
            "target": spaces.Discrete(self.n),
            "noise": spaces.Box(-1.0, 1.0, (self.dim,), dtype=np.float32),
        })
        self.action_space = spaces.Discrete(self.n)

    def _new_obs(self) -> dict[str, Any]:
        return {"target": np.int64(self.np_random.integers(self.n)),
                "noise": self.np_random.uniform(-1.0, 1.0, self.dim).astype(np.float32)}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self._obs = self._new_obs()
        return self._obs, {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        reward = float(int(action) == int(self._obs["target"]))
        self._obs = self._new_obs()
        return self._obs, reward, False, False, {}

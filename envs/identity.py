"""Identity envs: the reward is for echoing the observation back as the action."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class _IdentityEnv(gym.Env):
    """Shows a random observation each step; the reward depends on how well the action repeats it.

    Episodes never terminate by themselves; registration adds a TimeLimit (100 steps by default).
    ``get_state``/``set_state`` (the runner's protocol for resuming runs exactly) cover the generator and
    the observation shown.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def _new_obs(self) -> Any:
        raise NotImplementedError

    def _reward(self, action: Any) -> float:
        raise NotImplementedError

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self._obs = self._new_obs()
        return self._obs, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        reward = self._reward(action)
        self._obs = self._new_obs()
        return self._obs, reward, False, False, {}

    def get_state(self) -> dict[str, Any]:
        """The generator's state and the observation shown (JSON-able values and numpy data)."""
        return {"np_random": self.np_random.bit_generator.state, "obs": self._obs}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what ``get_state`` returned."""
        self.np_random.bit_generator.state = state["np_random"]
        self._obs = np.array(state["obs"], copy=True)[()] if np.ndim(state["obs"]) == 0 else np.array(state["obs"])


class IdentityDiscreteEnv(_IdentityEnv):
    """Observation Discrete(n); reward 1 when action == observation, else 0.

    Args:
        n: number of values.
    """

    def __init__(self, n: int = 4) -> None:
        self.n = int(n)
        self.observation_space = spaces.Discrete(self.n)
        self.action_space = spaces.Discrete(self.n)

    def _new_obs(self) -> np.int64:
        return np.int64(self.np_random.integers(self.n))

    def _reward(self, action: Any) -> float:
        return float(int(action) == int(self._obs))


class IdentityBoxEnv(_IdentityEnv):
    """Observation in [-1, 1]^dim; reward = -mean((action - observation)^2).

    Args:
        dim: size of the observation and action vectors.
    """

    def __init__(self, dim: int = 2) -> None:
        self.dim = int(dim)
        self.observation_space = spaces.Box(-1.0, 1.0, (self.dim,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (self.dim,), dtype=np.float32)

    def _new_obs(self) -> np.ndarray:
        return self.np_random.uniform(-1.0, 1.0, self.dim).astype(np.float32)

    def _reward(self, action: Any) -> float:
        a = np.asarray(action, dtype=np.float32).reshape(self.dim)
        return -float(np.mean(np.square(a - self._obs)))


class IdentityMultiDiscreteEnv(_IdentityEnv):
    """Observation MultiDiscrete(nvec); reward = fraction of components echoed correctly.

    Args:
        nvec: number of values of each component.
    """

    def __init__(self, nvec: tuple[int, ...] = (3, 4)) -> None:
        self.nvec = np.asarray(nvec, dtype=np.int64)
        self.observation_space = spaces.MultiDiscrete(self.nvec)
        self.action_space = spaces.MultiDiscrete(self.nvec)

    def _new_obs(self) -> np.ndarray:
        return (self.np_random.random(len(self.nvec)) * self.nvec).astype(np.int64)

    def _reward(self, action: Any) -> float:
        a = np.asarray(action).reshape(len(self.nvec))
        return float(np.mean(a == self._obs))

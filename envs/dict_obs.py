"""Envs with Dict observations: ``DictObsEnv`` (echo the "target" part, ignore the distracting "noise" part)
and ``DictImageEnv`` (an image key and a vector key, Box actions: the off-policy multi-input tests)."""

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


class DictImageEnv(gym.Env):
    """Observation {"image": uint8 Box (size, size, 1), "position": Box(-1, 1, (2,))}, action Box(-1, 1, (1,)).

    The image is dark with its left or right half lit (the side drawn at random each step); the reward is
    ``-(action - side - position[0] / 2) ** 2`` with side -1 (left) or +1 (right), so a policy needs the image
    and the vector key. The default size, 36, is the smallest image the Nature CNN takes.
    ``get_state``/``set_state`` cover the generator and the observation shown (exact resumption).

    Args:
        size: image height and width.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, size: int = 36) -> None:
        self.size = int(size)
        self.observation_space = spaces.Dict({
            "image": spaces.Box(0, 255, (self.size, self.size, 1), dtype=np.uint8),
            "position": spaces.Box(-1.0, 1.0, (2,), dtype=np.float32),
        })
        self.action_space = spaces.Box(-1.0, 1.0, (1,), dtype=np.float32)

    def _new_obs(self) -> dict[str, Any]:
        self._side = 1.0 if self.np_random.random() < 0.5 else -1.0
        image = np.zeros((self.size, self.size, 1), np.uint8)
        half = self.size // 2
        if self._side > 0:
            image[:, half:] = 255
        else:
            image[:, :half] = 255
        return {"image": image, "position": self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)}

    def target(self) -> float:
        """The best action for the observation shown."""
        return self._side + float(self._obs["position"][0]) / 2.0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self._obs = self._new_obs()
        return self._obs, {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        reward = -float((float(np.asarray(action).reshape(-1)[0]) - self.target()) ** 2)
        self._obs = self._new_obs()
        return self._obs, reward, False, False, {}

    def get_state(self) -> dict[str, Any]:
        """The generator's state, the lit side and the observation shown."""
        return {"np_random": self.np_random.bit_generator.state, "side": self._side, **self._obs}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what ``get_state`` returned."""
        self.np_random.bit_generator.state = state["np_random"]
        self._side = float(state["side"])
        self._obs = {"image": np.array(state["image"], np.uint8), "position": np.array(state["position"], np.float32)}

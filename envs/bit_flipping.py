"""Bit flipping (Andrychowicz et al. 2017, HER's sanity task): reach a random goal bit string.

A goal env in gymnasium-robotics' form: Dict observation ``observation`` / ``achieved_goal`` /
``desired_goal`` (the current bits, the current bits again, the goal bits), the sparse reward of
``compute_reward`` (-1 until the bits equal the goal, then 0), ``info["is_success"]``, and an episode of
``n_bits`` steps (truncated, never terminated: like the Fetch tasks, reaching the goal does not end it).
"""
from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class BitFlippingEnv(gym.Env):
    """``n_bits`` bits and a goal; an action flips bits.

    Args:
        n_bits: length of the bit string (and of an episode, unless ``max_steps`` is given).
        continuous: True: Box(-1, 1, (n_bits,)) actions flip every bit whose entry is > 0 (what ddpg, sac and
            td3 act in); False: Discrete(n_bits) actions flip one bit (the paper's version).
        max_steps: steps before the episode is truncated (None: ``n_bits``).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, n_bits: int = 8, continuous: bool = True, max_steps: int | None = None) -> None:
        if int(n_bits) < 1:
            raise ValueError(f"n_bits must be >= 1, got {n_bits}")
        self.n_bits, self.continuous = int(n_bits), bool(continuous)
        self.max_steps = self.n_bits if max_steps is None else int(max_steps)
        bits = spaces.MultiBinary(self.n_bits)
        self.observation_space = spaces.Dict({"observation": bits, "achieved_goal": bits, "desired_goal": bits})
        self.action_space = (spaces.Box(-1.0, 1.0, (self.n_bits,), dtype=np.float32) if self.continuous
                             else spaces.Discrete(self.n_bits))
        self._bits = np.zeros(self.n_bits, np.int8)
        self._goal = np.zeros(self.n_bits, np.int8)
        self._steps = 0

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self._bits.copy(), "achieved_goal": self._bits.copy(), "desired_goal": self._goal.copy()}

    def get_state(self) -> dict[str, Any]:
        """The generator, bits, goal and step count (the runner's protocol for exact resumes)."""
        return {"np_random": self.np_random.bit_generator.state, "bits": self._bits.copy(), "goal": self._goal.copy(),
                "steps": self._steps}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what ``get_state`` returned."""
        self.np_random.bit_generator.state = state["np_random"]
        self._bits = np.array(state["bits"], np.int8)
        self._goal = np.array(state["goal"], np.int8)
        self._steps = int(state["steps"])

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """-1.0 where the goals differ, 0.0 where they are equal; vectorised over a leading batch axis."""
        differ = np.any(np.asarray(achieved_goal) != np.asarray(desired_goal), axis=-1)
        return -differ.astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self._bits = self.np_random.integers(0, 2, self.n_bits).astype(np.int8)
        self._goal = self.np_random.integers(0, 2, self.n_bits).astype(np.int8)
        self._steps = 0
        return self._obs(), {"is_success": bool(np.array_equal(self._bits, self._goal))}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        if self.continuous:
            flip = np.asarray(action, np.float64).reshape(self.n_bits) > 0
        else:
            flip = np.arange(self.n_bits) == int(action)
        self._bits = np.where(flip, 1 - self._bits, self._bits).astype(np.int8)
        self._steps += 1
        reward = float(self.compute_reward(self._bits, self._goal, {}))
        return self._obs(), reward, False, self._steps >= self.max_steps, {"is_success": reward == 0.0}

"""MaskedBandit: a contextual bandit whose only rewarded action is masked out most of the time (a test env
for invalid-action masking, ``common.wrappers.action_mask``)."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

MASK_SOURCES = ("info", "method", "dict")


class MaskedBanditEnv(gym.Env):
    """Each step a random set of the ``n`` actions is legal; action 0, the only rewarded one (reward 1), is
    legal with probability ``p_rewarded`` only. The observation is the legal set as floats, so a policy can
    learn "take 0 when it is legal". Taking an illegal action counts in ``illegal_actions`` (reward 0):
    a learner that respects the masks keeps it at 0.

    Args:
        n: number of actions.
        p_rewarded: probability that action 0 is legal in a step.
        mask_source: how the env gives its mask: "info" (``info["action_mask"]``), "method"
            (``action_masks()``) or "dict" (a Dict observation ``{"observation", "action_mask"}``).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, n: int = 4, p_rewarded: float = 0.25, mask_source: str = "info") -> None:
        if mask_source not in MASK_SOURCES:
            raise ValueError(f"mask_source must be one of {MASK_SOURCES}, got {mask_source!r}")
        self.n, self.p_rewarded, self.mask_source = int(n), float(p_rewarded), mask_source
        self.action_space = spaces.Discrete(self.n)
        box = spaces.Box(0.0, 1.0, (self.n,), np.float32)
        self.observation_space = box if mask_source != "dict" else spaces.Dict(
            {"observation": box, "action_mask": spaces.MultiBinary(self.n)})
        self.illegal_actions = 0
        self.rewarded_legal = 0  # steps where action 0 was legal
        self.rewarded_taken = 0  # ... and taken
        self._mask = np.ones(self.n, bool)

    def action_masks(self) -> np.ndarray:
        """The legal actions of the current observation (bool [n])."""
        return self._mask.copy()

    def get_state(self) -> dict[str, Any]:
        """The generator, the current mask and the counters (the runner's protocol for exact resumes)."""
        return {"np_random": self.np_random.bit_generator.state, "mask": self._mask.copy(),
                "counts": [self.illegal_actions, self.rewarded_legal, self.rewarded_taken]}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what ``get_state`` returned."""
        self.np_random.bit_generator.state = state["np_random"]
        self._mask = np.array(state["mask"], bool)
        self.illegal_actions, self.rewarded_legal, self.rewarded_taken = (int(c) for c in state["counts"])

    def _new_mask(self) -> None:
        others = self.np_random.random(self.n - 1) < 0.5
        if not others.any():
            others[self.np_random.integers(self.n - 1)] = True
        self._mask = np.concatenate([[self.np_random.random() < self.p_rewarded], others])

    def _obs_info(self) -> tuple[Any, dict]:
        obs = self._mask.astype(np.float32)
        if self.mask_source == "dict":
            return {"observation": obs, "action_mask": self._mask.astype(np.int8)}, {}
        return obs, ({"action_mask": self._mask.copy()} if self.mask_source == "info" else {})

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self._new_mask()
        return self._obs_info()

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        a = int(action)
        legal = bool(self._mask[a])
        self.illegal_actions += int(not legal)
        self.rewarded_legal += int(self._mask[0])
        self.rewarded_taken += int(self._mask[0] and a == 0)
        reward = float(legal and a == 0)
        self._new_mask()
        obs, info = self._obs_info()
        return obs, reward, False, False, info

"""Two tiny PettingZoo envs for the adapter's tests (``common.games.pettingzoo``); importing this module
needs PettingZoo (``requirements-pettingzoo.txt``), so ``envs/__init__`` does not import it.

- ``NimAEC``: an AEC env; a pile of ``stones`` stones, each turn a player takes 1 (move 0) or 2 (move 1,
  legal only with 2 or more left, per ``action_mask``); whoever takes the last stone wins (+1, loser -1).
- ``PenniesParallel``: a parallel env of one simultaneous round; "even" wins when both show the same side.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv


class NimAEC(AECEnv):
    """Nim with one pile (see the module docstring)."""

    metadata = {"name": "nim_v0", "render_modes": ["ansi"], "is_parallelizable": False}  # noqa: RUF012

    def __init__(self, stones: int = 5, render_mode: str | None = None) -> None:
        super().__init__()
        self.stones0, self.render_mode = int(stones), render_mode
        self.possible_agents = ["first", "second"]
        obs = spaces.Dict({"observation": spaces.Box(0, 1, (self.stones0 + 1,), np.int8),
                           "action_mask": spaces.Box(0, 1, (2,), np.int8)})
        self.observation_spaces = dict.fromkeys(self.possible_agents, obs)
        self.action_spaces = {a: spaces.Discrete(2) for a in self.possible_agents}

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.stones = self.stones0
        self.rewards = dict.fromkeys(self.agents, 0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict] = {a: {} for a in self.agents}
        self.agent_selection = self.agents[0]

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        pile = np.zeros(self.stones0 + 1, np.int8)
        pile[self.stones] = 1
        return {"observation": pile, "action_mask": np.array([self.stones >= 1, self.stones >= 2], np.int8)}

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0
        self.stones -= int(action) + 1
        other = self.agents[1 - self.agents.index(agent)]
        if self.stones <= 0:
            self.rewards = {agent: 1, other: -1}
            self.terminations = dict.fromkeys(self.agents, True)
        else:
            self.rewards = dict.fromkeys(self.agents, 0)
        self.agent_selection = other
        self._accumulate_rewards()

    def render(self) -> str:
        return f"{self.stones} stones, {self.agent_selection} to move"


class PenniesParallel(ParallelEnv):
    """Matching pennies, one simultaneous round (see the module docstring)."""

    metadata = {"name": "pennies_v0", "render_modes": []}  # noqa: RUF012

    def __init__(self) -> None:
        self.possible_agents = ["even", "odd"]
        self.render_mode = None

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(0, 1, (1,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(2)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.agents = list(self.possible_agents)
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, int]) -> tuple[dict, dict, dict, dict, dict]:
        same = int(actions["even"]) == int(actions["odd"])
        rewards = {"even": 1 if same else -1, "odd": -1 if same else 1}
        obs = {a: np.zeros(1, np.float32) for a in self.agents}
        done = dict.fromkeys(self.agents, True)
        infos = {a: {} for a in self.agents}
        self.agents = []
        return obs, rewards, done, dict.fromkeys(done, False), infos

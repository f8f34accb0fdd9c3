"""Two tiny PettingZoo envs for the adapter's tests (``common.games.pettingzoo``); importing this module
needs PettingZoo (``requirements-pettingzoo.txt``), so ``envs/__init__`` does not import it.

- ``NimAEC``: an AEC env; a pile of ``stones`` stones, each turn a player takes 1 (move 0) or 2 (move 1,
  legal only with 2 or more left, per ``action_mask``); whoever takes the last stone wins (+1, loser -1).
- ``PenniesParallel``: a parallel env of one simultaneous round; "even" wins when both show the same side.
- ``GatherParallel`` (``--env=envs.pettingzoo_toys:gather_v0``): walkers on a line each walk to a goal and
  leave when they reach it; with ``scout=True`` a scout of other spaces joins them (``common.games.parallel``).
- ``scale_rewards``: a function of a parallel env, as ``--wrapper`` takes for parallel envs.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.wrappers import BaseParallelWrapper


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


class GatherParallel(ParallelEnv):
    """Walkers ``walker_<i>`` on cells ``0..size-1``, each with its own goal cell. A walker sees
    ``[position, goal] / size`` and moves left, stays or moves right (Discrete(3)); it earns -0.1 a step
    and +1 when it reaches its goal, where it leaves the episode. The episode ends when every walker has
    left or after ``max_cycles`` steps. ``scout=True`` adds ``scout_0``, who sees three numbers, has two
    moves (stay, right; 1 when it moves right from the last cell) and leaves after its first step right
    from the last cell. Its state is captured by ``get_state``/``set_state`` (exact resumption)."""

    metadata = {"name": "gather_v0", "render_modes": ["ansi"]}  # noqa: RUF012

    def __init__(self, walkers: int = 3, size: int = 5, max_cycles: int = 20, scout: bool = False,
                 render_mode: str | None = None) -> None:
        self.size, self.max_cycles, self.scout, self.render_mode = int(size), int(max_cycles), bool(scout), render_mode
        self.possible_agents = [f"walker_{i}" for i in range(int(walkers))] + (["scout_0"] if scout else [])
        self.rng = np.random.default_rng()
        self.agents: list[str] = []
        self.pos = np.zeros(len(self.possible_agents), np.int64)
        self.goal = np.zeros(len(self.possible_agents), np.int64)
        self.steps = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(0, 1, (3 if agent.startswith("scout") else 2,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(2 if agent.startswith("scout") else 3)

    def _obs(self) -> dict[str, np.ndarray]:
        out = {}
        for a in self.agents:
            i = self.possible_agents.index(a)
            seen = [self.pos[i], self.goal[i]] + ([self.steps] if a.startswith("scout") else [])
            out[a] = np.array(seen, np.float32) / max(self.size, self.max_cycles)
        return out

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        n = len(self.agents)
        self.pos = self.rng.integers(0, self.size, n)
        self.goal = (self.pos + self.rng.integers(1, self.size, n)) % self.size
        self.steps = 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, int]) -> tuple[dict, dict, dict, dict, dict]:
        self.steps += 1
        rewards, terms = {}, {}
        for a in self.agents:
            i = self.possible_agents.index(a)
            move = int(actions[a]) - (0 if a.startswith("scout") else 1)
            at_edge = self.pos[i] == self.size - 1
            self.pos[i] = min(max(self.pos[i] + move, 0), self.size - 1)
            if a.startswith("scout"):
                terms[a] = bool(at_edge and move == 1)
                rewards[a] = 1.0 if terms[a] else 0.0
            else:
                terms[a] = bool(self.pos[i] == self.goal[i])
                rewards[a] = (1.0 if terms[a] else 0.0) - 0.1
        truncs = {a: self.steps >= self.max_cycles and not terms[a] for a in self.agents}
        obs, infos = self._obs(), {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos

    def render(self) -> str:
        line = ["."] * self.size
        for a in self.agents:
            line[self.pos[self.possible_agents.index(a)]] = a[0]
        return "".join(line)

    def get_state(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state, "agents": list(self.agents), "pos": self.pos.copy(),
                "goal": self.goal.copy(), "steps": self.steps}

    def set_state(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.agents = list(state["agents"])
        self.pos, self.goal, self.steps = np.array(state["pos"]), np.array(state["goal"]), int(state["steps"])


gather_v0 = SimpleNamespace(parallel_env=GatherParallel)  # an env "module": --env=envs.pettingzoo_toys:gather_v0


class _ScaledRewards(BaseParallelWrapper):
    """A parallel env whose rewards are multiplied by ``factor`` (the rest, ``get_state`` included, is the env's)."""

    def __init__(self, env: ParallelEnv, factor: float) -> None:
        super().__init__(env)
        self.factor = float(factor)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        return obs, {a: r * self.factor for a, r in rewards.items()}, terms, truncs, infos


def scale_rewards(env: ParallelEnv, factor: float = 1.0) -> ParallelEnv:
    """A function of a parallel env, as ``--wrapper`` takes for them:
    ``--wrapper="envs.pettingzoo_toys:scale_rewards(factor=10.0)"``."""
    return _ScaledRewards(env, factor)

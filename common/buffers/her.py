"""Hindsight experience replay (Andrychowicz et al. 2017): a replay buffer of goal-env transitions that
relabels goals when it samples.

Observations are stored per Dict key (``observation``, ``achieved_goal``, ``desired_goal``, ...), each in
its own array, in one column per env: the envs of a vec env step at once and their episodes interleave,
but in its column each episode is a contiguous run of rows (a ring over ``size // n_envs`` rows). Only
transitions of complete episodes are sampled. A sampled transition at step t of an episode of length L
has its goal replaced, with probability ``1 - 1 / (1 + n_sampled_goal)``, by an achieved goal of the same
episode: ``future`` (after one of the steps t..L-1), ``final`` (after step L-1) or ``episode`` (after any
step). The rewards of the relabelled transitions come from ONE call of the env's vectorised
``compute_reward(achieved_goal, desired_goal, info)`` per ``sample`` (``info`` is ``{}``: step infos are
not stored, so a reward that reads them cannot be relabelled here). Termination flags are stored as the
env gave them (time-limit truncation is not termination: learners bootstrap there) and are not relabelled,
so goal envs should not terminate on success (the Fetch tasks and ``envs.bit_flipping`` never do).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from common.buffers.replay import terminal_aware_next

STRATEGIES = ("future", "final", "episode")
GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")
RewardFn = Callable[[np.ndarray, np.ndarray, Any], np.ndarray]


def check_goal_space(space: spaces.Space) -> str | None:
    """Why ``space`` is not a goal env's observation space (None when it is one)."""
    if not isinstance(space, spaces.Dict) or not set(GOAL_KEYS) <= set(space.spaces):
        return f"a goal env's Dict observation with keys {', '.join(GOAL_KEYS)}; this env's is {space}"
    achieved, desired = space.spaces["achieved_goal"], space.spaces["desired_goal"]
    if achieved.shape != desired.shape:
        return f"achieved_goal and desired_goal of one shape; this env's are {achieved.shape} and {desired.shape}"
    return None


def vec_env_reward(venv: Any) -> RewardFn:
    """The ``compute_reward`` of ``venv``'s first env (through ``env_method``, so subprocess envs work)."""
    def compute_reward(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        return venv.env_method("compute_reward", achieved_goal, desired_goal, info, indices=[0])[0]

    return compute_reward


def _storage_dtype(space: spaces.Space) -> np.dtype:
    dtype = np.dtype(space.dtype)
    return np.dtype(np.float32) if np.issubdtype(dtype, np.floating) else dtype


class HerReplayBuffer:
    """Goal-env transitions per env column, relabelled at sample time (see the module docstring).

    Args:
        size: capacity in transitions (all envs together).
        observation_space: the goal env's Dict observation space.
        action_dim: size of a (flat) action.
        n_envs: envs of the vec env that ``store`` receives steps from.
        compute_reward: the env's vectorised ``compute_reward(achieved_goal, desired_goal, info)``.
        encode: maps a Dict batch of observations to the network's input (e.g. ``ObsEncoder``); None
            returns the Dicts.
        strategy: goal selection, one of ``STRATEGIES``.
        n_sampled_goal: relabelled goals per real one (the share relabelled is n / (n + 1)).
    """

    def __init__(self, size: int, observation_space: spaces.Dict, action_dim: int, n_envs: int,
                 compute_reward: RewardFn, *, encode: Callable[[dict], Any] | None = None,
                 strategy: str = "future", n_sampled_goal: int = 4) -> None:
        problem = check_goal_space(observation_space)
        if problem:
            raise ValueError(f"HER needs {problem}")
        if strategy not in STRATEGIES:
            raise ValueError(f"goal selection strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
        if int(n_sampled_goal) < 0:
            raise ValueError(f"n_sampled_goal must be >= 0, got {n_sampled_goal}")
        self.n_envs = int(n_envs)
        self.rows = max(1, int(size) // self.n_envs)
        self.compute_reward, self.encode, self.strategy = compute_reward, encode, strategy
        self.relabel_share = 1.0 - 1.0 / (1.0 + int(n_sampled_goal))
        shape = (self.rows, self.n_envs)
        self.keys = tuple(observation_space.spaces)
        self.obs = {k: np.zeros((*shape, *s.shape), _storage_dtype(s)) for k, s in observation_space.spaces.items()}
        self.next_obs = {k: np.zeros_like(v) for k, v in self.obs.items()}
        self.actions = np.zeros((*shape, int(action_dim)), np.float32)
        self.rewards = np.zeros(shape, np.float32)
        self.dones = np.zeros(shape, np.float32)
        self.ep_start = np.zeros(shape, np.int64)  # row where each transition's episode started
        self.ep_length = np.zeros(shape, np.int64)  # its episode's length; 0: in flight or overwritten
        self._cur_start = np.zeros(self.n_envs, np.int64)
        self._cur_length = np.zeros(self.n_envs, np.int64)
        self._row = 0
        self._filled = 0  # rows written at least once
        self._complete = 0  # transitions in complete episodes (what can be sampled)

    def state(self) -> dict[str, Any]:
        """Everything the buffer holds, for training-state checkpoints (``common.checkpoint``): the filled
        rows of the live arrays (views; a checkpoint streams them), the episode bookkeeping and positions."""
        from common.checkpoint import FilledRows

        n = self._filled
        arrays = {"obs": {k: FilledRows(v, n) for k, v in self.obs.items()},
                  "next_obs": {k: FilledRows(v, n) for k, v in self.next_obs.items()},
                  **{k: FilledRows(getattr(self, k), n) for k in ("actions", "rewards", "dones", "ep_start",
                                                                   "ep_length")}}
        return {**arrays, "cur_start": self._cur_start, "cur_length": self._cur_length, "row": self._row,
                "filled": n, "complete": self._complete}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state`` returned (arrays of this buffer's dtypes and row shape, at most its rows)."""
        row, filled = int(state["row"]), int(state["filled"])
        if not (0 <= row < self.rows and 0 <= filled <= self.rows):
            raise ValueError(f"HER buffer position {row}/{filled} outside its {self.rows} rows")
        targets = {**{("obs", k): v for k, v in self.obs.items()}, **{("next_obs", k): v for k, v in self.next_obs.items()},
                   **{(k, None): getattr(self, k) for k in ("actions", "rewards", "dones", "ep_start", "ep_length")}}
        for (name, key), target in targets.items():
            rows = np.asarray(state[name] if key is None else state[name][key])
            if rows is not target:
                target[: len(rows)] = rows
        self._cur_start[:] = state["cur_start"]
        self._cur_length[:] = state["cur_length"]
        self._row, self._filled, self._complete = row, filled, int(state["complete"])

    def __len__(self) -> int:
        """Transitions that can be sampled: those of complete episodes still in the buffer."""
        return self._complete

    def store(self, obs: dict, x: Any, actions: np.ndarray, rewards: np.ndarray, new_obs: dict, next_x: Any,
              dones: np.ndarray, infos: Sequence[dict]) -> None:
        """Store one vec-env step: raw Dict ``obs`` / ``new_obs`` (``x`` / ``next_x``, their encodings, are
        not needed); finished episodes' last observations come from ``infos``."""
        row = self._row
        self._forget_episodes_at(row)
        terminated = None
        for k in self.keys:
            nxt, terminated = terminal_aware_next(new_obs[k], dones, infos,
                                                  lambda items, k=k: np.stack([np.asarray(o[k]) for o in items]))
            self.obs[k][row] = obs[k]
            self.next_obs[k][row] = nxt
        self.actions[row] = np.asarray(actions, np.float32).reshape(self.n_envs, -1)
        self.rewards[row] = rewards
        self.dones[row] = terminated
        self.ep_start[row] = self._cur_start
        self.ep_length[row] = 0
        self._cur_length += 1
        for e in np.flatnonzero(dones):
            length = int(self._cur_length[e])
            if length <= self.rows:  # an episode longer than the buffer lost its start: never sampled
                self.ep_length[(self._cur_start[e] + np.arange(length)) % self.rows, e] = length
                self._complete += length
            self._cur_start[e], self._cur_length[e] = (row + 1) % self.rows, 0
        self._row = (row + 1) % self.rows
        self._filled = max(self._filled, row + 1)

    def _forget_episodes_at(self, row: int) -> None:
        """Mark the complete episodes that ``row`` is about to overwrite as not sampleable (all their rows)."""
        lengths = self.ep_length[row].copy()
        for e in np.flatnonzero(lengths):
            self.ep_length[(self.ep_start[row, e] + np.arange(lengths[e])) % self.rows, e] = 0
            self._complete -= int(lengths[e])

    def _sample_cells(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(rows, envs) of ``n`` transitions drawn uniformly, with replacement, from complete episodes."""
        if self._complete == 0:
            raise ValueError("cannot sample: no complete episode in the HER buffer yet")
        lengths = self.ep_length[:self._filled].reshape(-1)  # a view: rows in use, row-major (row * n_envs + env)
        if 4 * self._complete < lengths.size:  # mostly in flight: draw from the valid cells directly
            flat = rng.choice(np.flatnonzero(lengths > 0), n)
        else:  # rejection sampling: at least a quarter of the draws are kept
            parts, need = [], n
            while need > 0:
                draw = rng.integers(0, lengths.size, 2 * need + 16)
                draw = draw[lengths[draw] > 0][:need]
                parts.append(draw)
                need -= len(draw)
            flat = np.concatenate(parts)
        return flat // self.n_envs, flat % self.n_envs

    def goal_rows(self, rows: np.ndarray, envs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The rows (same env columns) whose ``next_obs["achieved_goal"]`` become the new goals of the
        transitions at (``rows``, ``envs``), by the buffer's strategy."""
        start, length = self.ep_start[rows, envs], self.ep_length[rows, envs]
        t = (rows - start) % self.rows
        if self.strategy == "future":
            offset = t + (rng.random(len(rows)) * (length - t)).astype(np.int64)
        elif self.strategy == "final":
            offset = length - 1
        else:
            offset = (rng.random(len(rows)) * length).astype(np.int64)
        return (start + offset) % self.rows

    def sample(self, batch_shape: int | tuple[int, ...], rng: np.random.Generator) -> dict[str, Any]:
        """A batch (``obs``, ``actions``, ``rewards``, ``next_obs``, ``dones``) of ``batch_shape``
        transitions, a share of them relabelled; observations through ``encode``."""
        batch_shape = (batch_shape,) if isinstance(batch_shape, (int, np.integer)) else tuple(batch_shape)
        n = int(np.prod(batch_shape))
        rows, envs = self._sample_cells(n, rng)
        obs = {k: v[rows, envs] for k, v in self.obs.items()}
        next_obs = {k: v[rows, envs] for k, v in self.next_obs.items()}
        rewards = self.rewards[rows, envs]
        relabel = np.flatnonzero(rng.random(n) < self.relabel_share)
        if relabel.size:
            goals = self.next_obs["achieved_goal"][self.goal_rows(rows[relabel], envs[relabel], rng), envs[relabel]]
            obs["desired_goal"][relabel] = goals
            next_obs["desired_goal"][relabel] = goals
            rewards[relabel] = np.asarray(
                self.compute_reward(next_obs["achieved_goal"][relabel], goals, {}), np.float32).reshape(-1)
        batch = {"obs": obs, "actions": self.actions[rows, envs], "rewards": rewards, "next_obs": next_obs,
                 "dones": self.dones[rows, envs]}
        if self.encode is not None:
            batch["obs"], batch["next_obs"] = self.encode(obs), self.encode(next_obs)
        return {k: _reshaped(v, batch_shape) for k, v in batch.items()}


def _reshaped(value: Any, batch_shape: tuple[int, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _reshaped(v, batch_shape) for k, v in value.items()}
    return value.reshape(*batch_shape, *value.shape[1:])

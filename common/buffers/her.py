"""Hindsight experience replay (Andrychowicz et al. 2017): a replay buffer of goal-env transitions that
relabels goals when it samples.

Observations are stored per Dict key (``observation``, ``achieved_goal``, ``desired_goal``, ...), each in
its own array, in one column per env: the envs of a vec env step at once and their episodes interleave,
but in its column each episode is a contiguous run of rows (a ring over ``size // n_envs`` rows). Only
transitions of complete episodes are sampled. A sampled transition at step t of an episode of length L
has its goal replaced, with probability ``1 - 1 / (1 + n_sampled_goal)``, by an achieved goal of the same
episode: ``future`` (after one of the steps t..L-1), ``final`` (after step L-1) or ``episode`` (after any
step). The rewards of the relabelled transitions come from ONE call of the env's vectorised
``compute_reward(achieved_goal, desired_goal, info)`` per ``sample``, ``info`` being a numpy array of the
relabelled transitions' step infos, one dict each, as stable-baselines3's HER passes them. Only numeric
scalar info values are kept (bool, int, float: at most ``INFO_SLOTS`` keys, the first ones seen, each
value as a float64 in one array, so that checkpoints stay plain arrays); the vec env's own keys
(``terminal_observation``, ``TimeLimit.truncated``, Monitor's ``episode``) are not, and a key a step's
info lacked is absent from that transition's dict. The per-key storage is ``DictReplayBuffer``'s
(``common.buffers.dict_replay``). Termination flags are stored as the
env gave them (time-limit truncation is not termination: learners bootstrap there) and are not relabelled,
so goal envs should not terminate on success (the Fetch tasks and ``envs.bit_flipping`` never do).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from common.buffers.dict_replay import DictReplayBuffer, batch_shape_of

STRATEGIES = ("future", "final", "episode")
GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")
RewardFn = Callable[[np.ndarray, np.ndarray, Any], np.ndarray]
INFO_SLOTS = 4  # numeric info keys kept per transition
VEC_ENV_INFO_KEYS = ("terminal_observation", "TimeLimit.truncated", "episode")  # not the env's own values
INFO_KINDS = {"bool": bool, "int": int, "float": float}  # how a stored value is handed back


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


def _scalar_kind(value: Any) -> str | None:
    """"bool", "int" or "float" for a numeric scalar info value (Python or numpy), None otherwise."""
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            return None
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    return None


class HerReplayBuffer(DictReplayBuffer):
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

    ROW_ARRAYS = (*DictReplayBuffer.ROW_ARRAYS, "ep_start", "ep_length", "info_values")
    CELL_OVERHEAD = 16 + 8 * INFO_SLOTS  # ep_start, ep_length (int64) and the float64 info values

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
        super().__init__(size, observation_space, action_dim, n_envs, encode=encode)
        self.compute_reward, self.strategy = compute_reward, strategy
        self.relabel_share = 1.0 - 1.0 / (1.0 + int(n_sampled_goal))
        shape = (self.rows, self.n_envs)
        self.ep_start = np.zeros(shape, np.int64)  # row where each transition's episode started
        self.ep_length = np.zeros(shape, np.int64)  # its episode's length; 0: in flight or overwritten
        self.info_values = np.full((*shape, INFO_SLOTS), np.nan)  # numeric step infos; NaN: absent
        self.info_keys: list[str] = []  # the key of each info_values slot in use, and its kind
        self.info_kinds: list[str] = []
        self._cur_start = np.zeros(self.n_envs, np.int64)
        self._cur_length = np.zeros(self.n_envs, np.int64)
        self._complete = 0  # transitions in complete episodes (what can be sampled)

    def state(self) -> dict[str, Any]:
        """``DictReplayBuffer.state`` with the episode bookkeeping and the info keys."""
        return {**super().state(), "cur_start": self._cur_start, "cur_length": self._cur_length,
                "complete": self._complete, "info_keys": list(self.info_keys), "info_kinds": list(self.info_kinds)}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state`` returned."""
        keys, kinds = list(state["info_keys"]), list(state["info_kinds"])
        if len(keys) != len(kinds) or len(keys) > INFO_SLOTS or not all(
                isinstance(k, str) for k in keys) or not set(kinds) <= set(INFO_KINDS):
            raise ValueError(f"HER buffer info keys {keys!r} / kinds {kinds!r} do not fit its {INFO_SLOTS} slots")
        super().load_state(state)
        self._cur_start[:] = state["cur_start"]
        self._cur_length[:] = state["cur_length"]
        self._complete = int(state["complete"])
        self.info_keys, self.info_kinds = keys, kinds

    def __len__(self) -> int:
        """Transitions that can be sampled: those of complete episodes still in the buffer."""
        return self._complete

    def store(self, obs: dict, x: Any, actions: np.ndarray, rewards: np.ndarray, new_obs: dict, next_x: Any,
              dones: np.ndarray, infos: Sequence[dict]) -> None:
        """Store one vec-env step: raw Dict ``obs`` / ``new_obs`` (``x`` / ``next_x``, their encodings, are
        not needed) and the numeric values of ``infos``; finished episodes' last observations come from
        ``infos``."""
        row = self._row
        self._forget_episodes_at(row)
        self._write_row(obs, actions, rewards, new_obs, dones, infos)
        self._store_infos(row, infos)
        self.ep_start[row] = self._cur_start
        self.ep_length[row] = 0
        self._cur_length += 1
        for e in np.flatnonzero(dones):
            self._close_episode(e, (row + 1) % self.rows)
        self._advance()

    def restart(self) -> None:
        """End every env's episode in flight at its last stored step, as a truncated episode (the envs
        started new episodes without finishing theirs: a resumed run whose envs could not be restored), so
        that the goals relabelled for its transitions come from it and not from the next episode."""
        for e in np.flatnonzero(self._cur_length):
            self._close_episode(e, self._row)

    def _close_episode(self, e: int, next_start: int) -> None:
        """Make env ``e``'s current episode complete (sampleable) and start its next one at row ``next_start``."""
        length = int(self._cur_length[e])
        if length <= self.rows:  # an episode longer than the buffer lost its start: never sampled
            self.ep_length[(self._cur_start[e] + np.arange(length)) % self.rows, e] = length
            self._complete += length
        self._cur_start[e], self._cur_length[e] = next_start, 0

    def _store_infos(self, row: int, infos: Sequence[dict]) -> None:
        """The numeric scalar values of each env's step info into ``info_values[row]`` (new keys take free
        slots; see the module docstring)."""
        values = self.info_values[row]
        values[:] = np.nan
        for e, info in enumerate(infos):
            for key, value in info.items():
                if key in VEC_ENV_INFO_KEYS:
                    continue
                kind = _scalar_kind(value)
                if kind is None:
                    continue
                if key not in self.info_keys:
                    if len(self.info_keys) == INFO_SLOTS:
                        continue
                    self.info_keys.append(key)
                    self.info_kinds.append(kind)
                values[e, self.info_keys.index(key)] = float(value)

    def infos(self, rows: np.ndarray, envs: np.ndarray) -> np.ndarray:
        """The stored step infos of the transitions at (``rows``, ``envs``): a numpy array of dicts, one per
        transition, each value of its key's kind (what ``compute_reward`` receives)."""
        out = np.empty(len(rows), dtype=object)
        keys, values = self.info_keys, self.info_values[rows, envs, :len(self.info_keys)]
        present = ~np.isnan(values)
        columns = [np.where(present[:, j], values[:, j], 0).astype(INFO_KINDS[kind]).tolist()
                   for j, kind in enumerate(self.info_kinds)]  # Python bools, ints and floats
        table = list(zip(*columns)) if columns else [()] * len(rows)  # a row of values per transition
        if present.all():
            out[:] = [dict(zip(keys, row)) for row in table]
        else:
            out[:] = [{k: v for k, v, p in zip(keys, row, mask) if p} for row, mask in zip(table, present.tolist())]
        return out

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
        batch_shape = batch_shape_of(batch_shape)
        n = int(np.prod(batch_shape))
        rows, envs = self._sample_cells(n, rng)
        batch = self._gather(rows, envs)
        relabel = np.flatnonzero(rng.random(n) < self.relabel_share)
        if relabel.size:
            goals = self.next_obs["achieved_goal"][self.goal_rows(rows[relabel], envs[relabel], rng), envs[relabel]]
            batch["obs"]["desired_goal"][relabel] = goals
            batch["next_obs"]["desired_goal"][relabel] = goals
            batch["rewards"][relabel] = np.asarray(self.compute_reward(
                batch["next_obs"]["achieved_goal"][relabel], goals, self.infos(rows[relabel], envs[relabel])),
                np.float32).reshape(-1)
        return self._finish(batch, batch_shape)

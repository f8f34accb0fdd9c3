"""Uniform replay of Dict observations stored per key, without copying them into one array.

Each key of the observation space has its own arrays (``obs[key]``, ``next_obs[key]``) in the dtype the env
gives (uint8 images stay uint8; floats are stored as float32), with one column per env: the envs of a vec
env step at once, and row r holds every env's transition of one step (a ring over ``size // n_envs``
rows). A finished episode's stored next observation is its ``terminal_observation`` and its done flag is
set only when it really ended (time-limit truncation bootstraps), as ``terminal_aware_next`` does for the
flat replay. ``sample`` draws filled cells uniformly and hands the observations to ``encode`` (the model's
encoder) only then. ``common.buffers.her.HerReplayBuffer`` adds episodes and goal relabelling on top.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from common.buffers.replay import terminal_aware_next
from common.memory import check_fits, row_bytes


def storage_dtype(space: spaces.Space) -> np.dtype:
    """The dtype a key's observations are stored in: float32 for floats, the space's own otherwise."""
    dtype = np.dtype(space.dtype)
    return np.dtype(np.float32) if np.issubdtype(dtype, np.floating) else dtype


def batch_shape_of(batch_shape: int | tuple[int, ...]) -> tuple[int, ...]:
    """``batch_shape`` as a tuple (an int ``b`` is ``(b,)``)."""
    return (batch_shape,) if isinstance(batch_shape, (int, np.integer)) else tuple(batch_shape)


def reshaped(value: Any, batch_shape: tuple[int, ...]) -> Any:
    """Arrays (nested in dicts) with their leading axis reshaped to ``batch_shape``."""
    if isinstance(value, dict):
        return {k: reshaped(v, batch_shape) for k, v in value.items()}
    return value.reshape(*batch_shape, *value.shape[1:])


class DictReplayBuffer:
    """Dict-observation transitions per key and per env column (see the module docstring).

    Args:
        size: capacity in transitions (all envs together).
        observation_space: the env's Dict observation space.
        action_dim: size of a (flat) action.
        n_envs: envs of the vec env that ``store`` receives steps from.
        encode: maps a Dict batch of observations to the network's input (the model's encoder); None
            returns the Dicts.
    """

    ROW_ARRAYS: ClassVar[tuple[str, ...]] = ("actions", "rewards", "dones")  # per-cell arrays besides obs
    CELL_OVERHEAD: ClassVar[int] = 0  # bytes per transition that subclasses keep besides these arrays

    def __init__(self, size: int, observation_space: spaces.Dict, action_dim: int, n_envs: int, *,
                 encode: Callable[[dict], Any] | None = None) -> None:
        if not isinstance(observation_space, spaces.Dict):
            raise TypeError(f"a Dict replay needs a Dict observation space, got {observation_space}")
        self.n_envs = int(n_envs)
        self.rows = max(1, int(size) // self.n_envs)
        self.encode = encode
        shape = (self.rows, self.n_envs)
        self.keys = tuple(observation_space.spaces)
        cell = [(s.shape, storage_dtype(s)) for s in observation_space.spaces.values()] * 2
        cell += [((int(action_dim),), np.float32), ((), np.float32), ((), np.float32)]
        check_fits(self.rows * self.n_envs, row_bytes(cell) + self.CELL_OVERHEAD, "the replay buffer", "buffer_size")
        self.obs = {k: np.zeros((*shape, *s.shape), storage_dtype(s)) for k, s in observation_space.spaces.items()}
        self.next_obs = {k: np.zeros(v.shape, v.dtype) for k, v in self.obs.items()}  # zeros_like would touch every page
        self.actions = np.zeros((*shape, int(action_dim)), np.float32)
        self.rewards = np.zeros(shape, np.float32)
        self.dones = np.zeros(shape, np.float32)
        self._row = 0
        self._filled = 0  # rows written at least once

    def state(self) -> dict[str, Any]:
        """Everything the buffer holds, for training-state checkpoints (``common.files.checkpoint``): the filled
        rows of the live arrays (views; a checkpoint streams them) and the ring position."""
        from common.files.checkpoint import FilledRows

        n = self._filled
        return {"obs": {k: FilledRows(v, n) for k, v in self.obs.items()},
                "next_obs": {k: FilledRows(v, n) for k, v in self.next_obs.items()},
                **{k: FilledRows(getattr(self, k), n) for k in self.ROW_ARRAYS}, "row": self._row, "filled": n}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state`` returned (arrays of this buffer's dtypes and row shape, at most its rows)."""
        row, filled = int(state["row"]), int(state["filled"])
        if not (0 <= row < self.rows and 0 <= filled <= self.rows):
            raise ValueError(f"replay position {row}/{filled} outside its {self.rows} rows")
        targets = {**{("obs", k): v for k, v in self.obs.items()}, **{("next_obs", k): v for k, v in self.next_obs.items()},
                   **{(k, None): getattr(self, k) for k in self.ROW_ARRAYS}}
        for (name, key), target in targets.items():
            rows = np.asarray(state[name] if key is None else state[name][key])
            if rows is not target:
                target[: len(rows)] = rows
        self._row, self._filled = row, filled

    def __len__(self) -> int:
        """Transitions that can be sampled."""
        return self._filled * self.n_envs

    def restart(self) -> None:
        """The envs started new episodes without finishing theirs: nothing to do (no episodes are tracked)."""

    def _write_row(self, obs: dict, actions: np.ndarray, rewards: np.ndarray, new_obs: dict, dones: np.ndarray,
                   infos: Sequence[dict]) -> None:
        """Write one vec-env step into the current row (finished episodes' next observations from ``infos``)."""
        row = self._row
        terminated = None
        for k in self.keys:
            nxt, terminated = terminal_aware_next(new_obs[k], dones, infos,
                                                  lambda items, k=k: np.stack([np.asarray(o[k]) for o in items]))
            self.obs[k][row] = obs[k]
            self.next_obs[k][row] = nxt
        self.actions[row] = np.asarray(actions, np.float32).reshape(self.n_envs, -1)
        self.rewards[row] = rewards
        self.dones[row] = terminated

    def _advance(self) -> None:
        self._filled = max(self._filled, self._row + 1)
        self._row = (self._row + 1) % self.rows

    def store(self, obs: dict, x: Any, actions: np.ndarray, rewards: np.ndarray, new_obs: dict, next_x: Any,
              dones: np.ndarray, infos: Sequence[dict]) -> None:
        """Store one vec-env step from its raw Dict ``obs`` / ``new_obs`` (``x`` / ``next_x``, their
        encodings, are not needed)."""
        self._write_row(obs, actions, rewards, new_obs, dones, infos)
        self._advance()

    def _sample_cells(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(rows, envs) of ``n`` transitions drawn uniformly, with replacement."""
        if self._filled == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        flat = rng.integers(0, self._filled * self.n_envs, n)
        return flat // self.n_envs, flat % self.n_envs

    def _gather(self, rows: np.ndarray, envs: np.ndarray) -> dict[str, Any]:
        """The transitions at (``rows``, ``envs``): copies, observations as Dicts of per-key arrays."""
        return {"obs": {k: v[rows, envs] for k, v in self.obs.items()}, "actions": self.actions[rows, envs],
                "rewards": self.rewards[rows, envs], "next_obs": {k: v[rows, envs] for k, v in self.next_obs.items()},
                "dones": self.dones[rows, envs]}

    def _finish(self, batch: dict[str, Any], batch_shape: tuple[int, ...]) -> dict[str, Any]:
        """Observations through ``encode``, every array reshaped to ``batch_shape``."""
        if self.encode is not None:
            batch["obs"], batch["next_obs"] = self.encode(batch["obs"]), self.encode(batch["next_obs"])
        return {k: reshaped(v, batch_shape) for k, v in batch.items()}

    def sample(self, batch_shape: int | tuple[int, ...], rng: np.random.Generator) -> dict[str, Any]:
        """A batch (``obs``, ``actions``, ``rewards``, ``next_obs``, ``dones``) of ``batch_shape`` transitions
        drawn uniformly; observations through ``encode``."""
        batch_shape = batch_shape_of(batch_shape)
        rows, envs = self._sample_cells(int(np.prod(batch_shape)), rng)
        return self._finish(self._gather(rows, envs), batch_shape)

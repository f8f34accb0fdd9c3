"""Uniform experience replay shared by the off-policy algorithms (deepq, ddpg).

Transitions are stored in preallocated numpy arrays, one row per transition. A vectorized environment adds
one row per env per step. Time-limit truncation is handled here once for every learner: the stored
``next_obs`` of a finished episode is its ``terminal_observation`` and the stored ``done`` flag is set only
when the episode really ended, so learners bootstrap through truncation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from common.memory import check_fits, row_bytes


class ReplayBuffer:
    """A ring buffer of (obs, action, reward, next_obs, done) rows.

    Args:
        size: capacity in transitions; the oldest rows are overwritten once it is full.
        obs_shape: shape of one observation.
        action_shape: shape of one action (``()`` for a Discrete action).
        obs_dtype: dtype observations are stored in (keep uint8 images as uint8).
        action_dtype: dtype actions are stored in.
        extras: further per-row arrays, name -> (shape of one row, dtype) (deepq's ``next_masks``, the
            action masks of the next observations); ``add`` takes them as keywords, ``gather`` returns them.

    A buffer that cannot fit in the available memory is refused (ConfigError) before anything is allocated.
    """

    ROW_OVERHEAD: ClassVar[int] = 0  # bytes per row that subclasses keep besides the arrays

    def __init__(
        self,
        size: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...] = (),
        obs_dtype: Any = np.float32,
        action_dtype: Any = np.int64,
        extras: dict[str, tuple[tuple[int, ...], Any]] | None = None,
    ) -> None:
        if size <= 0:
            raise ValueError(f"replay buffer size must be positive, got {size}")
        self.capacity = int(size)
        rows = {"obs": (tuple(obs_shape), obs_dtype), "next_obs": (tuple(obs_shape), obs_dtype),
                "actions": (tuple(action_shape), action_dtype), "rewards": ((), np.float32), "dones": ((), np.float32)}
        check_fits(self.capacity, row_bytes([*rows.values(), *(extras or {}).values()]) + self.ROW_OVERHEAD,
                   "the replay buffer", "buffer_size")
        for name, (shape, dtype) in rows.items():
            setattr(self, name, np.zeros((self.capacity, *shape), dtype=dtype))
        self.extras = {name: np.zeros((self.capacity, *shape), dtype=dtype)
                       for name, (shape, dtype) in (extras or {}).items()}
        self._next_idx = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def restart(self) -> None:
        """The envs started new episodes without finishing theirs: nothing to do (no episodes are tracked)."""

    def state(self) -> dict[str, Any]:
        """Everything the buffer holds, for checkpoints (``common.files.checkpoint``): the filled rows of the
        live arrays (views, not copies; a checkpoint streams them) and the ring position. Subclasses add
        theirs."""
        from common.files.checkpoint import FilledRows

        n = self._size
        return {**{k: FilledRows(getattr(self, k), n) for k in ("obs", "next_obs", "actions", "rewards", "dones")},
                "extras": {k: FilledRows(a, n) for k, a in self.extras.items()},
                "next_idx": self._next_idx, "size": n}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state`` returned (arrays of this buffer's dtypes, with its row shape and at most
        its capacity of rows)."""
        next_idx, size = int(state["next_idx"]), int(state["size"])
        if not (0 <= next_idx < self.capacity and 0 <= size <= self.capacity):
            raise ValueError(f"replay buffer position {next_idx}/{size} outside its capacity {self.capacity}")
        targets = {name: getattr(self, name) for name in ("obs", "next_obs", "actions", "rewards", "dones")}
        rows_of = {**{name: state[name] for name in targets}, **state.get("extras", {})}
        if set(state.get("extras", {})) != set(self.extras):
            raise ValueError(f"replay buffer extras {sorted(state.get('extras', {}))} differ from {sorted(self.extras)}")
        for name, target in {**targets, **self.extras}.items():
            rows = np.asarray(rows_of[name])
            if rows is not target:
                target[: len(rows)] = rows
        self._next_idx, self._size = next_idx, size

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        dones: np.ndarray,
        **extras: np.ndarray,
    ) -> np.ndarray:
        """Store a batch of transitions (leading axis = envs) and return the row indices used.

        ``dones`` must be True only where the episode terminated (not where it was truncated); ``extras``
        are the rows of the arrays named in the constructor's ``extras``.
        """
        n = len(rewards)
        if n > self.capacity:
            raise ValueError(f"cannot add {n} transitions to a buffer of capacity {self.capacity}")
        idx = (self._next_idx + np.arange(n)) % self.capacity
        self.obs[idx] = obs
        self.actions[idx] = actions
        self.rewards[idx] = rewards
        self.next_obs[idx] = next_obs
        self.dones[idx] = dones
        for name, rows in extras.items():
            self.extras[name][idx] = rows
        self._next_idx = int((self._next_idx + n) % self.capacity)
        self._size = min(self._size + n, self.capacity)
        return idx

    def add_vec_step(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        new_obs: np.ndarray,
        dones: np.ndarray,
        infos: list[dict],
    ) -> np.ndarray:
        """Store one VecEnv step, replacing auto-reset observations by the episodes' terminal ones."""
        next_obs, terminated = terminal_aware_next(new_obs, dones, infos)
        return self.add(obs, actions, rewards, next_obs, terminated)

    def gather(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        """Return the rows ``idx`` as a dict of arrays (obs, actions, rewards, next_obs, dones, and the extras)."""
        return {
            "obs": self.obs[idx],
            "actions": self.actions[idx],
            "rewards": self.rewards[idx],
            "next_obs": self.next_obs[idx],
            "dones": self.dones[idx],
            **{name: arr[idx] for name, arr in self.extras.items()},
        }

    def sample_indices(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Uniformly sampled row indices, with replacement; shape follows ``batch_size`` (int or tuple)."""
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return rng.integers(0, self._size, size=batch_size)

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Uniformly sample ``batch_size`` transitions (a tuple such as (k, b) gives k batches at once)."""
        return self.gather(self.sample_indices(batch_size, rng))


def terminal_aware_next(
    next_obs: np.ndarray,
    dones: np.ndarray,
    infos: Sequence[dict],
    encode: Callable[[list], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Next observations and termination flags (float32, 1.0 = terminated) for replay from one VecEnv step.

    Where an env finished, the VecEnv already reset it: its true last observation is
    ``infos[i]["terminal_observation"]``, which replaces row i of a copy of ``next_obs``, and the episode
    counts as terminated unless ``infos[i]["TimeLimit.truncated"]``. ``encode`` turns a list of raw terminal
    observations into rows like ``next_obs``'s (e.g. ``ObsEncoder.encode_list`` when ``next_obs`` holds
    encoded observations); None stores them as they are. When no env finished, ``next_obs`` itself comes
    back with all flags 0.
    """
    done_idx = np.flatnonzero(dones)
    terminated = np.zeros(len(dones), dtype=np.float32)
    if done_idx.size == 0:
        return next_obs, terminated
    next_obs = np.array(next_obs, copy=True)
    with_terminal = [i for i in done_idx if "terminal_observation" in infos[i]]
    rows = [infos[i]["terminal_observation"] for i in with_terminal]
    if encode is not None and rows:
        rows = encode(rows)
    for i, row in zip(with_terminal, rows):
        next_obs[i] = row
    for i in done_idx:
        terminated[i] = 0.0 if infos[i].get("TimeLimit.truncated", False) else 1.0
    return next_obs, terminated

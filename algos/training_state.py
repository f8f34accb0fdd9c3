"""What a training-state checkpoint holds beyond a loop's own components, and the log files a resumed
run continues.

``run_components(run)`` are the parts every run has (episode statistics, the clock, the run's generator,
VecNormalize statistics, the envs' states, the evaluator's record); loops add theirs with
``TrainingRun.track``. ``log_file_sizes`` records, at each checkpoint, how long the files a run appends to
were (progress.csv/json, log.txt, evaluations.csv, TensorBoard events, this rank's monitor files);
``truncate_log_files`` cuts them back before a resumed run appends, so what was written after the
checkpoint (and is done again) appears once.
"""
from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np

from common.files.checkpoint import GeneratorState
from common.vec_env import unwrap_vec_normalize

ROOT_LOG_FILES = ("progress.csv", "progress.json", "log.txt", "evaluations.csv", "tb/*")


class EnvStates:
    """The envs' own state through ``env_method("get_state")`` (the Monitor's, which covers the env and its
    wrappers; ``common.wrappers.env_state``). ``restored`` tells whether the last ``load_state`` put every env back
    (False: an env cannot be captured, and the resumed run starts new episodes)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.restored = False

    def state(self) -> dict[str, Any]:
        """Each env's state, or None for every env when one of them cannot be captured."""
        try:
            states = self.env.env_method("get_state")
        except AttributeError:  # an env made without the runner's Monitor
            states = [None]
        return {"states": None if any(s is None for s in states) else states}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore every env when the checkpoint holds their states (it then has as many as this env)."""
        states = state["states"]
        self.restored = states is not None
        if states is None:
            return
        if len(states) != self.env.num_envs:
            raise ValueError(f"the checkpoint holds {len(states)} envs, this run has {self.env.num_envs}")
        for i, s in enumerate(states):
            self.env.env_method("set_state", s, indices=[i])


class VecNormalizeState:
    """A VecNormalize's statistics and its running discounted returns."""

    def __init__(self, vec_normalize: Any) -> None:
        self.vn = vec_normalize

    def state(self) -> dict[str, Any]:
        """Statistics, settings and returns."""
        return {**self.vn.get_state(), "returns": self.vn.returns}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state`` returned."""
        self.vn.set_state({k: v for k, v in state.items() if k != "returns"})
        self.vn.returns[...] = state["returns"]


class EpisodeState:
    """``EpisodeStats``: the window of returns and lengths and the episode count."""

    def __init__(self, episodes: Any) -> None:
        self.episodes = episodes

    def state(self) -> dict[str, Any]:
        """The window and the count."""
        e = self.episodes
        return {"returns": list(e.returns), "lengths": list(e.lengths), "count": e.count,
                "groups": {g: list(w) for g, w in e.groups.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state`` returned."""
        self.episodes.restore(state["returns"], state["lengths"], state["count"], state.get("groups"))


def run_components(run: Any) -> dict[str, Any]:
    """The checkpoint components every ``TrainingRun`` has."""
    out: dict[str, Any] = {"episodes": EpisodeState(run.episodes), "run_rng": GeneratorState(run.rng),
                           "envs": run.env_states}
    vn = unwrap_vec_normalize(run.env)
    if vn is not None:
        out["vec_normalize"] = VecNormalizeState(vn)
    if run.evaluator is not None:
        out["evaluator"] = _Attributes(run.evaluator, ("best_mean", "last_timesteps", "seconds"))
    return out


class _Attributes:
    """Some attributes of an object as a component (written back on load)."""

    def __init__(self, obj: Any, names: tuple[str, ...]) -> None:
        self._obj, self._names = obj, names

    def state(self) -> dict[str, Any]:
        """The attributes' values."""
        return {n: getattr(self._obj, n) for n in self._names}

    def load_state(self, state: dict[str, Any]) -> None:
        """Set the attributes."""
        for n in self._names:
            setattr(self._obj, n, state[n])


def log_file_sizes(folder: str, rank: int) -> dict[str, int]:
    """Sizes of the files a run appends to (relative path -> bytes): rank 0 has the shared ones, every
    rank its monitor files."""
    patterns = [*(ROOT_LOG_FILES if rank == 0 else ()), f"{rank}.*.monitor.csv"]
    out = {}
    for pattern in patterns:
        for path in glob.glob(os.path.join(folder, pattern)):
            if os.path.isfile(path):
                out[os.path.relpath(path, folder)] = os.path.getsize(path)
    return out


def truncate_log_files(folder: str, sizes: Any) -> None:
    """Cut the files of ``sizes`` (from a checkpoint: relative names inside ``folder`` only) back to their
    recorded length; files the checkpoint did not know are left alone."""
    if not isinstance(sizes, dict):
        return
    root = os.path.realpath(folder)
    for name, size in sizes.items():
        path = os.path.realpath(os.path.join(root, str(name)))
        if not path.startswith(root + os.sep) or not isinstance(size, int) or size < 0:
            continue
        if os.path.isfile(path) and os.path.getsize(path) > size:
            with open(path, "r+b") as f:
                f.truncate(size)


def steps_reached(folder: str) -> int | None:
    """How far the run in ``folder`` got before it stopped, as far as its files tell: the larger of the last
    logged step count and the steps of the episodes in its monitor files (None: neither is there)."""
    counts = [n for n in (last_logged_step(folder), _monitor_steps(folder)) if n is not None]
    return max(counts) if counts else None


def _monitor_steps(folder: str) -> int | None:
    from common.wrappers.monitor import (
        LoadMonitorResultsError,
        get_monitor_files,
        read_monitor_file,
    )

    total, seen = 0, False
    for path in get_monitor_files(folder):
        try:
            read = read_monitor_file(path, allow_empty=True)
        except (OSError, ValueError, LoadMonitorResultsError):
            continue
        if read is not None:
            seen = True
            total += sum(int(float(r.get("l") or 0)) for r in read[1])
    return total if seen else None


def last_logged_step(folder: str) -> int | None:
    """The last ``time/total_timesteps`` in ``<folder>/progress.csv``, or None."""
    import csv

    from common.logs.log_keys import TOTAL_TIMESTEPS

    try:
        with open(os.path.join(folder, "progress.csv"), newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error, UnicodeDecodeError):
        return None
    values = []
    for row in rows:
        try:
            value = float(row.get(TOTAL_TIMESTEPS) or "nan")
        except ValueError:
            continue
        if np.isfinite(value):
            values.append(int(value))
    return max(values) if values else None

"""Monitor: episode return/length/time of a gymnasium env, in ``info["episode"]`` and a
``*.monitor.csv`` file (first line ``#{json header}``, then a CSV header ``r,l,t,<info keys>``)."""

from __future__ import annotations

import contextlib
import csv
import glob
import json
import math
import os
import time
from typing import Any

import gymnasium as gym
import numpy as np

from common.process.std_streams import write_failed

EXT = "monitor.csv"


class ResultsWriter:
    """Appends one row per episode to ``<filename>.monitor.csv``.

    Args:
        filename: path; ".monitor.csv" is appended unless it already ends so. A folder gets "monitor.csv".
        header: JSON-able dict written on the first line.
        extra_keys: names of extra columns after r, l, t.
        append: continue an existing file (a resumed run): rows are appended, ``header`` is the file's own.
    """

    def __init__(self, filename: str, header: dict[str, Any], extra_keys: tuple[str, ...] = (),
                 append: bool = False) -> None:
        if not filename.endswith(EXT):
            filename = os.path.join(filename, EXT) if os.path.isdir(filename) else f"{filename}.{EXT}"
        self.filename = filename
        self.header = header
        existing = read_monitor_header(filename) if append else None
        if existing is not None:
            self.header = existing
            self._file = open(filename, "a", newline="")  # noqa: SIM115 - kept open for the env's life
            self._writer = csv.DictWriter(self._file, fieldnames=("r", "l", "t", *extra_keys))
            return
        self._file = open(filename, "w", newline="")  # noqa: SIM115 - kept open for the env's life
        self._file.write("#" + json.dumps(header) + "\n")
        self._writer = csv.DictWriter(self._file, fieldnames=("r", "l", "t", *extra_keys))
        self._writer.writeheader()
        self._file.flush()

    def write_row(self, row: dict[str, Any]) -> None:
        """Write one episode and flush, so a crash loses nothing. When the file cannot be written (a full
        disk) the env goes on: one line on stderr, and the file gets no more rows."""
        if self._file.closed:
            return
        try:
            self._writer.writerow(row)
            self._file.flush()
        except OSError as e:
            self.close()
            write_failed(f"monitor file {self.filename}", e, "the env goes on without it")

    def close(self) -> None:
        """Close the file."""
        if not self._file.closed:
            with contextlib.suppress(OSError):  # what a full disk did not take is lost either way
                self._file.close()


class Monitor(gym.Wrapper):
    """Records every episode's return ``r``, length ``l`` and wall time since start ``t``.

    Args:
        env: the env to watch.
        filename: where to write ``<filename>.monitor.csv``; None writes nothing.
        allow_early_resets: allow ``reset()`` before the episode is over.
        reset_keywords: keys of the ``reset(options=...)`` dict recorded with each episode.
        info_keywords: keys of the final step's info recorded with each episode.
        append: continue ``filename``'s existing file (a resumed run; times count from its ``t_start``).

    ``get_state``/``set_state`` capture and restore the episode in progress with the state of the env
    and wrappers under the Monitor (``common.wrappers.env_state``); ``get_state`` is None when they cannot be.
    """

    def __init__(self, env: gym.Env, filename: str | None = None, allow_early_resets: bool = True,
                 reset_keywords: tuple[str, ...] = (), info_keywords: tuple[str, ...] = (),
                 append: bool = False) -> None:
        super().__init__(env)
        self.t_start = time.time()
        self.allow_early_resets = allow_early_resets
        self.reset_keywords = tuple(reset_keywords)
        self.info_keywords = tuple(info_keywords)
        self.results_writer: ResultsWriter | None = None
        if filename is not None:
            env_id = env.spec.id if env.spec is not None else None
            self.results_writer = ResultsWriter(filename, {"t_start": self.t_start, "env_id": env_id},
                                                self.reset_keywords + self.info_keywords, append=append)
            self.t_start = float(self.results_writer.header.get("t_start", self.t_start))
        self.rewards: list[float] = []
        self.needs_reset = True
        self.episode_returns: list[float] = []
        self.episode_lengths: list[int] = []
        self.episode_times: list[float] = []
        self.total_steps = 0
        self.current_reset_info: dict[str, Any] = {}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if not self.allow_early_resets and not self.needs_reset:
            raise RuntimeError("Monitor: reset() called before the episode ended; wrap with "
                               "Monitor(env, allow_early_resets=True) to allow it")
        options = options or {}
        for key in self.reset_keywords:
            if key not in options:
                raise ValueError(f"Monitor expects reset(options=...) to hold key {key!r} (a reset_keyword)")
            self.current_reset_info[key] = options[key]
        self.rewards = []
        self.needs_reset = False
        return self.env.reset(seed=seed, options=options or None)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        if self.needs_reset:
            raise RuntimeError("Monitor: step() called on a finished episode; call reset() first")
        obs, rew, terminated, truncated, info = self.env.step(action)
        self.rewards.append(float(rew))
        self.total_steps += 1
        if terminated or truncated:
            self.needs_reset = True
            ep_rew, ep_len = float(sum(self.rewards)), len(self.rewards)
            ep_info: dict[str, Any] = {"r": round(ep_rew, 6), "l": ep_len, "t": round(time.time() - self.t_start, 6)}
            for key in self.info_keywords:
                ep_info[key] = info[key]
            self.episode_returns.append(ep_rew)
            self.episode_lengths.append(ep_len)
            self.episode_times.append(ep_info["t"])
            ep_info.update(self.current_reset_info)
            if self.results_writer is not None:
                self.results_writer.write_row(ep_info)
            info["episode"] = {"r": ep_info["r"], "l": ep_len, "t": ep_info["t"]}
        return obs, rew, terminated, truncated, info

    def get_state(self) -> dict[str, Any] | None:
        """The episode in progress and the state of everything under the Monitor; None when the env or a
        wrapper under it does not offer its state."""
        from common.wrappers import env_state

        inner = env_state.capture(self.env)
        if inner is None:
            return None
        return {"rewards": list(self.rewards), "needs_reset": self.needs_reset, "total_steps": self.total_steps,
                "inner": inner}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what ``get_state`` returned."""
        from common.wrappers import env_state

        self.rewards = [float(r) for r in state["rewards"]]
        self.needs_reset, self.total_steps = bool(state["needs_reset"]), int(state["total_steps"])
        env_state.restore(self.env, state["inner"])

    def close(self) -> None:
        super().close()
        if self.results_writer is not None:
            self.results_writer.close()

    def get_total_steps(self) -> int:
        """Steps taken over all episodes."""
        return self.total_steps

    def get_episode_rewards(self) -> list[float]:
        """Return of every finished episode."""
        return self.episode_returns

    def get_episode_lengths(self) -> list[int]:
        """Length of every finished episode."""
        return self.episode_lengths

    def get_episode_times(self) -> list[float]:
        """Seconds since start at the end of every finished episode."""
        return self.episode_times


class LoadMonitorResultsError(Exception):
    """No monitor file, or an unreadable one, in the given folder."""


def get_monitor_files(path: str) -> list[str]:
    """All ``*monitor.csv`` files in folder ``path`` (sorted)."""
    return sorted(glob.glob(os.path.join(path, "*" + EXT)))


def read_monitor_header(path: str) -> dict[str, Any] | None:
    """The JSON header of a monitor file, or None when there is no such file or no readable header."""
    try:
        with open(path, newline="") as f:
            first = f.readline()
        header = json.loads(first[1:]) if first.startswith("#") else None
    except (OSError, ValueError):
        return None
    return header if isinstance(header, dict) else None


def read_monitor_file(path: str, allow_empty: bool = False) -> tuple[Any, list[dict[str, str]]] | None:
    """The JSON header and the CSV rows (values as written, strings) of one monitor file; rows whose ``r``,
    ``l`` and ``t`` are not numbers (a row cut short by a crash, or edited) are left out.

    Args:
        allow_empty: an empty file (its header not written yet) gives None instead of an error.

    Raises:
        LoadMonitorResultsError: the first line is not ``#{json header}``.
        json.JSONDecodeError: the header line is not JSON.
    """
    with open(path, newline="") as f:
        first = f.readline()
        if allow_empty and not first:
            return None
        if not first.startswith("#"):
            raise LoadMonitorResultsError(f"{path} does not start with a '#{{json}}' header line")
        header = json.loads(first[1:])
        return header, [row for row in csv.DictReader(f) if is_episode_row(row)]


def is_episode_row(row: dict[str, Any]) -> bool:
    """Whether a monitor row holds an episode: ``r`` a number, ``l`` a whole number >= 0, ``t`` a finite number."""
    try:
        float(row["r"])
        length, t = float(row["l"]), float(row["t"])
    except (KeyError, TypeError, ValueError):
        return False
    return math.isfinite(t) and math.isfinite(length) and length >= 0 and length.is_integer()


def load_results(path: str) -> dict[str, np.ndarray]:
    """Read every monitor file of folder ``path`` into one table, sorted by time.

    Returns:
        dict of equal-length numpy arrays: "r", "l", "t" (seconds since the earliest file's start)
        and any extra columns (as float where possible, else str).
    """
    files = get_monitor_files(path)
    if not files:
        raise LoadMonitorResultsError(f"no *{EXT} files in {path!r}; was the env wrapped in Monitor(filename=...)?")
    rows: list[dict[str, str]] = []
    starts: list[float] = []
    file_rows: list[list[dict[str, str]]] = []
    for fname in files:
        header, frows = read_monitor_file(fname)
        starts.append(float(header["t_start"]))
        file_rows.append(frows)
    t0 = min(starts)
    columns: list[str] = []
    for start, frows in zip(starts, file_rows):
        for row in frows:
            row["t"] = str(float(row["t"]) + start - t0)
            rows.append(row)
            for key in row:
                if key not in columns:
                    columns.append(key)
    rows.sort(key=lambda r: float(r["t"]))
    out: dict[str, np.ndarray] = {}
    for key in columns:
        values = [r.get(key, "") for r in rows]
        try:
            out[key] = np.array([float(v) for v in values], dtype=np.float64)
        except ValueError:
            out[key] = np.array(values, dtype=str)
    if "l" in out:
        out["l"] = out["l"].astype(np.int64)
    return out

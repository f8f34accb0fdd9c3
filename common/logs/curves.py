"""Learning curves from log folders, in numpy: reading runs and aggregating them.

A *run* is one log folder: its ``*.monitor.csv`` files (one per env, all ranks) give episode
returns against cumulative timesteps; without them, ``progress.csv`` gives the logged mean
return against the logged timestep count. Runs of the same configuration (seeds) are grouped
and aggregated as the mean over runs on a common timestep grid with a spread (``common.logs.plot_util``
draws them).
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from common.logs.log_keys import EP_RETURN_MEAN, TOTAL_TIMESTEPS
from common.wrappers.monitor import LoadMonitorResultsError, read_monitor_file

MONITOR_SUFFIX = ".monitor.csv"
PROGRESS_FILE = "progress.csv"
SPREADS = ("std", "ci95", "minmax", "none")
SPREAD_WORDS = {"std": "mean ± 1 std", "ci95": "95% CI of the mean", "minmax": "min to max"}  # the band's legend
CONFIG_FILE = "config.json"  # the run's resolved configuration (run.py): its algorithm and env
SOURCES = ("auto", "monitor", "progress")
_SEED_SUFFIX = re.compile(r"(^|[-_.])(seed|rank|run|s)?[-_=]?\d+$", re.IGNORECASE)


class NoDataError(ValueError):
    """A log folder holds no monitor episodes and no usable progress.csv."""


@dataclass
class Run:
    """One log folder's learning curve.

    Attributes:
        path: the log folder.
        timesteps: cumulative environment steps at each point (increasing).
        returns: episode return (monitor) or logged mean return (progress.csv) at each point.
        source: "monitor" or "progress".
    """

    path: str
    timesteps: np.ndarray
    returns: np.ndarray
    source: str

    @property
    def name(self) -> str:
        """The folder's base name."""
        return os.path.basename(os.path.normpath(self.path))

    @property
    def alg(self) -> str | None:
        """The algorithm of the run (its config.json), None when unknown."""
        return run_config(self.path).get("alg")

    @property
    def env(self) -> str | None:
        """The env id of the run (its config.json), None when unknown."""
        return run_config(self.path).get("env_id")


@dataclass
class Curve:
    """One drawn group: the mean over its runs and the shaded band, on a shared grid."""

    label: str
    x: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_runs: int


# ---------------------------------------------------------------- reading


def run_config(log_dir: str) -> dict[str, str]:
    """``alg`` and ``env_id`` of the run's config.json (string values only); {} without a readable one."""
    try:
        with open(os.path.join(log_dir, CONFIG_FILE), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(record, dict):
        return {}
    return {k: record[k] for k in ("alg", "env_id") if isinstance(record.get(k), str)}


def get_monitor_files(log_dir: str) -> list[str]:
    """Sorted paths of the monitor files (``*monitor.csv``) directly inside ``log_dir``."""
    if not os.path.isdir(log_dir):
        return []
    names = sorted(n for n in os.listdir(log_dir) if n.endswith("monitor.csv"))
    return [os.path.join(log_dir, n) for n in names]


def _read_monitor_file(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(returns, lengths, absolute end times) of the complete rows of one monitor file."""
    try:
        read = read_monitor_file(path, allow_empty=True)
    except LoadMonitorResultsError:
        raise NoDataError(f"{path}: not a monitor file (first line must be '#{{json header}}')") from None
    except json.JSONDecodeError as e:
        raise NoDataError(f"{path}: unreadable monitor header ({e})") from None
    if read is None:  # just created, header not flushed yet
        empty = np.zeros(0)
        return empty, empty, empty
    header, raw_rows = read
    try:
        t_start = float(header.get("t_start", 0.0))
    except (AttributeError, TypeError, ValueError) as e:
        raise NoDataError(f"{path}: unreadable monitor header ({e})") from None
    rows = []
    for row in raw_rows:
        try:  # a row cut short by a crash or a concurrent write is skipped
            rows.append((float(row["r"]), float(row["l"]), float(row["t"])))
        except (KeyError, TypeError, ValueError):
            continue
    data = np.asarray(rows, dtype=np.float64).reshape(-1, 3)
    return data[:, 0], data[:, 1], data[:, 2] + t_start


def load_monitor(log_dir: str) -> Run:
    """Episode returns against cumulative timesteps from all monitor files in ``log_dir``.

    Episodes of all files (envs, ranks) are merged in order of their end time, so the
    timestep axis counts the steps of every env.
    """
    files = get_monitor_files(log_dir)
    if not files:
        raise NoDataError(f"no *{MONITOR_SUFFIX} files in {log_dir}")
    parts = [_read_monitor_file(p) for p in files]
    returns = np.concatenate([p[0] for p in parts])
    lengths = np.concatenate([p[1] for p in parts])
    ends = np.concatenate([p[2] for p in parts])
    if returns.size == 0:
        raise NoDataError(f"the monitor files in {log_dir} hold no finished episode yet")
    order = np.argsort(ends, kind="stable")
    return Run(log_dir, np.cumsum(lengths[order]), returns[order], "monitor")


def load_progress(log_dir: str) -> Run:
    """Logged mean episode return against logged timesteps from ``log_dir/progress.csv``.

    Rows with a blank or non-numeric value in either column are skipped.
    """
    path = os.path.join(log_dir, PROGRESS_FILE)
    if not os.path.isfile(path):
        raise NoDataError(f"no {PROGRESS_FILE} in {log_dir}")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        xkey, ykey = TOTAL_TIMESTEPS, EP_RETURN_MEAN
        if xkey not in header or ykey not in header:
            raise NoDataError(f"{path} has no {xkey} or no {ykey} column")
        points = []
        for row in reader:
            try:
                x, y = float(row[xkey]), float(row[ykey])
            except (TypeError, ValueError):
                continue
            if np.isfinite(x) and np.isfinite(y):
                points.append((x, y))
    if not points:
        raise NoDataError(f"{path} has no row with both {xkey!r} and {ykey!r}")
    data = np.asarray(points, dtype=np.float64)
    return Run(log_dir, data[:, 0], data[:, 1], "progress")


def load_run(log_dir: str, source: str = "auto") -> Run:
    """The learning curve of one log folder.

    Args:
        log_dir: folder holding ``*.monitor.csv`` files and/or ``progress.csv``.
        source: "monitor", "progress", or "auto" (monitor files, else progress.csv).

    Raises:
        NoDataError: the folder has nothing to plot.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; use one of {', '.join(SOURCES)}")
    if source == "monitor":
        return load_monitor(log_dir)
    if source == "progress":
        return load_progress(log_dir)
    try:
        return load_monitor(log_dir)
    except NoDataError as monitor_error:
        try:
            return load_progress(log_dir)
        except NoDataError as progress_error:
            raise NoDataError(f"{monitor_error}; {progress_error}") from None


def _is_run_dir(filenames: Iterable[str]) -> bool:
    return any(n.endswith("monitor.csv") or n == PROGRESS_FILE for n in filenames)


def find_runs(paths: Sequence[str], source: str = "auto") -> list[Run]:
    """Every run found in or below the given folders, in path order.

    Folders holding monitor files or progress.csv are runs; folders with nothing to plot
    yet (no finished episode) are skipped.

    Raises:
        NoDataError: a path does not exist, or no run with data was found.
    """
    run_dirs: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            raise NoDataError(f"log folder {path} does not exist")
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames.sort()
            if _is_run_dir(filenames):
                run_dirs.append(dirpath)
    runs = []
    for d in sorted(dict.fromkeys(run_dirs)):
        try:
            runs.append(load_run(d, source))
        except NoDataError:
            continue
    if not runs:
        raise NoDataError(
            f"no monitor files or progress.csv with data in {', '.join(paths)}"
        )
    return runs


# ---------------------------------------------------------------- numbers


def smooth(y: np.ndarray, radius: int) -> np.ndarray:
    """Centred moving average over ``2 * radius + 1`` points; the window shrinks at the ends.

    The radius is capped at a fifth of the number of points, so that a short curve (a few
    progress.csv rows) keeps its shape instead of flattening into one mean.
    """
    y = np.asarray(y, dtype=np.float64)
    if radius < 0:
        raise ValueError(f"smoothing radius must be >= 0, got {radius}")
    radius = min(radius, y.size // 5)
    if radius == 0:
        return y.copy()
    csum = np.concatenate([[0.0], np.cumsum(y)])
    idx = np.arange(y.size)
    lo = np.maximum(idx - radius, 0)
    hi = np.minimum(idx + radius + 1, y.size)
    return (csum[hi] - csum[lo]) / (hi - lo)


GroupBy = str | Callable[[Run], str] | None


def group_key(run: Run, group_by: GroupBy = "auto") -> str:
    """The label of the group a run belongs to.

    Args:
        group_by: "auto" (the folder name without a trailing seed/index such as ``-seed3``,
            ``_2``, ``s1``; the parent folder's name if nothing is left), "parent" (the
            parent folder's name), "alg" or "env" (the run's config.json; the folder name
            without a seed when it has none), "run" or None (each run alone), a regular expression
            (its first group, or the whole match, searched in the run's path; the run's own
            name when it does not match), or a callable ``Run -> str``.
    """
    if callable(group_by):
        return str(group_by(run))
    parent = os.path.basename(os.path.dirname(os.path.normpath(run.path)))
    if group_by in (None, "run"):
        return run.name
    if group_by == "parent":
        return parent
    if group_by in ("alg", "env"):
        return getattr(run, group_by) or group_key(run, "auto")
    if group_by == "auto":
        return _SEED_SUFFIX.sub("", run.name) or parent or run.name
    try:
        match = re.search(group_by, run.path.replace(os.sep, "/"))
    except re.error as e:
        raise ValueError(f"--group {group_by!r} is not a valid regular expression ({e})") from None
    if match is None:
        return run.name
    return match.group(1) if match.groups() and match.group(1) is not None else match.group(0)


def group_runs(runs: Sequence[Run], group_by: GroupBy = "auto") -> dict[str, list[Run]]:
    """Runs grouped by ``group_key``, groups in order of first appearance."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(group_key(run, group_by), []).append(run)
    return groups


def aggregate(
    label: str, runs: Sequence[Run], smooth_radius: int = 10, spread: str = "std", points: int = 200
) -> Curve:
    """Mean and spread of smoothed runs on a common timestep grid.

    Each run is smoothed over its own points, then interpolated linearly on ``points``
    timesteps spanning the range every run covers. A single run is returned at its own
    points with no band.

    Args:
        spread: "std" (mean +- one standard deviation over runs), "ci95" (mean +- 1.96 standard
            errors: a 95% confidence interval of the mean, normal approximation), "minmax", or "none".
    """
    if spread not in SPREADS:
        raise ValueError(f"unknown spread {spread!r}; use one of {', '.join(SPREADS)}")
    if not runs:
        raise ValueError(f"group {label!r} has no runs")
    ys = [smooth(r.returns, smooth_radius) for r in runs]
    if len(runs) == 1:
        x = np.asarray(runs[0].timesteps, dtype=np.float64)
        return Curve(label, x, ys[0], ys[0].copy(), ys[0].copy(), 1)
    start = max(float(r.timesteps[0]) for r in runs)
    stop = min(float(r.timesteps[-1]) for r in runs)
    if stop < start:  # runs do not overlap: fall back to the union of their ranges
        start = min(float(r.timesteps[0]) for r in runs)
        stop = max(float(r.timesteps[-1]) for r in runs)
    x = np.linspace(start, stop, points)
    grid = np.stack([np.interp(x, r.timesteps, y) for r, y in zip(runs, ys)])
    mean = grid.mean(axis=0)
    if spread == "std":
        std = grid.std(axis=0)
        low, high = mean - std, mean + std
    elif spread == "ci95":
        half = 1.96 * grid.std(axis=0, ddof=1) / np.sqrt(len(runs))
        low, high = mean - half, mean + half
    elif spread == "minmax":
        low, high = grid.min(axis=0), grid.max(axis=0)
    else:
        low, high = mean.copy(), mean.copy()
    return Curve(label, x, mean, low, high, len(runs))


EVALUATIONS_FILE = "evaluations.csv"  # one row per evaluation during training (runner.evaluation)


def read_evaluations(log_dir: str) -> dict[str, np.ndarray] | None:
    """The columns of ``<log_dir>/evaluations.csv`` as arrays, or None when there is none."""
    path = os.path.join(log_dir, EVALUATIONS_FILE)
    if not os.path.exists(path):
        return None
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return None
    return {key: np.array([float(r[key]) for r in rows]) for key in rows[0]}

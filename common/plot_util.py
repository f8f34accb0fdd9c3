"""Learning curves from log folders: read monitor files / progress.csv and draw a PNG.

A *run* is one log folder: its ``*.monitor.csv`` files (one per env, all ranks) give episode
returns against cumulative timesteps; without them, ``progress.csv`` gives the logged mean
return against the logged timestep count. Runs of the same configuration (seeds) are grouped
and drawn as the mean over runs on a common timestep grid with a shaded spread.

matplotlib is imported only inside the drawing functions, so importing this module is cheap.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from common.log_keys import EP_RETURN_MEAN, TOTAL_TIMESTEPS
from common.monitor import LoadMonitorResultsError, read_monitor_file

MONITOR_SUFFIX = ".monitor.csv"
PROGRESS_FILE = "progress.csv"
FINAL_CURVE_FILE = "learning_curve.png"


SPREADS = ("std", "minmax", "none")
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
            parent folder's name), "run" or None (each run alone), a regular expression
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
        spread: "std" (mean +- one standard deviation over runs), "minmax", or "none".
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
    elif spread == "minmax":
        low, high = grid.min(axis=0), grid.max(axis=0)
    else:
        low, high = mean.copy(), mean.copy()
    return Curve(label, x, mean, low, high, len(runs))


# ---------------------------------------------------------------- drawing


def _new_figure(width: int, height: int, dpi: int):
    from matplotlib.figure import Figure  # lazy: the runner must not pay for matplotlib

    if width < 50 or height < 50:
        raise ValueError(f"image size must be at least 50x50 pixels, got {width}x{height}")
    return Figure(figsize=(width / dpi, height / dpi), dpi=dpi, layout="constrained")


def _save_png(fig, out_path: str, dpi: int) -> None:
    """Write the figure atomically: a temporary file in the same folder, then rename."""
    folder = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(out_path)}.{os.getpid()}.tmp")
    try:
        fig.savefig(tmp, dpi=dpi, format="png")
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def plot_curves(
    runs: Sequence[Run],
    out_path: str,
    smooth_radius: int = 10,
    group_by: GroupBy = "auto",
    spread: str = "std",
    width: int = 800,
    height: int = 500,
    dpi: int = 100,
    title: str | None = None,
) -> list[Curve]:
    """Draw grouped learning curves into a PNG of exactly ``width`` x ``height`` pixels.

    Args:
        runs: runs from ``load_run`` / ``find_runs``.
        out_path: the PNG to write (atomically; folders are created).
        smooth_radius: moving-average radius in points (episodes or log rows); 0 = raw.
        group_by: how runs form groups, see ``group_key``.
        spread: band drawn around each group's mean: "std", "minmax" or "none".

    Returns:
        The drawn curves, one per group.
    """
    if not runs:
        raise ValueError("no runs to plot")
    curves = [  # a group of one run is labelled by the run's own folder name
        aggregate(label if len(members) > 1 else members[0].name, members, smooth_radius, spread)
        for label, members in group_runs(runs, group_by).items()
    ]
    fig = _new_figure(width, height, dpi)
    ax = fig.add_subplot()
    for curve in curves:
        name = curve.label if curve.n_runs == 1 else f"{curve.label} ({curve.n_runs} runs)"
        (line,) = ax.plot(curve.x, curve.mean, label=name, linewidth=1.5)
        if curve.n_runs > 1 and spread != "none":
            ax.fill_between(curve.x, curve.low, curve.high, color=line.get_color(), alpha=0.25)
    ax.set_xlabel("timesteps")
    ax.set_ylabel("episode return")
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    _save_png(fig, out_path, dpi)
    return curves


def write_final_curve(log_dir: str, smooth_radius: int = 10, width: int = 800, height: int = 500) -> str | None:
    """Write ``<log_dir>/learning_curve.png`` for the run logged in ``log_dir``.

    Returns:
        The PNG's path, or None when the folder holds no finished episode yet.
    """
    try:
        run = load_run(log_dir)
    except NoDataError:
        return None
    out_path = os.path.join(log_dir, FINAL_CURVE_FILE)
    plot_curves([run], out_path, smooth_radius=smooth_radius, group_by="run", width=width,
                height=height, title=run.name)
    return out_path


def png_size(path: str) -> tuple[int, int]:
    """(width, height) read from a PNG file's IHDR chunk.

    Raises:
        ValueError: the file is not a PNG.
    """
    import struct

    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG file")
    width, height = struct.unpack(">II", head[16:24])
    return width, height

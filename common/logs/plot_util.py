"""Drawing learning curves (``common.logs.curves``) into PNG files; ``write_final_curve`` for a finished run.

matplotlib is imported only inside the drawing functions, so importing this module is cheap.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from common.logs.curves import (
    Curve,
    GroupBy,
    NoDataError,
    Run,
    aggregate,
    group_runs,
    load_run,
    read_evaluations,
)

FINAL_CURVE_FILE = "learning_curve.png"


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
    evaluations: tuple[Sequence[float], Sequence[float]] | None = None,
) -> list[Curve]:
    """Draw grouped learning curves into a PNG of exactly ``width`` x ``height`` pixels.

    Args:
        runs: runs from ``load_run`` / ``find_runs``.
        out_path: the PNG to write (atomically; folders are created).
        smooth_radius: moving-average radius in points (episodes or log rows); 0 = raw.
        group_by: how runs form groups, see ``group_key``.
        spread: band drawn around each group's mean: "std", "minmax" or "none".
        evaluations: (timesteps, evaluation mean returns) drawn beside the training curve, as points.

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
    if evaluations is not None and len(evaluations[0]):
        ax.plot(evaluations[0], evaluations[1], "o-", markersize=3, linewidth=1, label="evaluation (deterministic)")
    ax.set_xlabel("timesteps")
    ax.set_ylabel("episode return")
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    _save_png(fig, out_path, dpi)
    return curves


def warm_up() -> None:
    """Draw a small figure into memory: loads what a first drawing would (fonts, the PNG renderer)."""
    import io

    fig = _new_figure(100, 100, 100)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], label="x")
    ax.set(xlabel="steps", ylabel="return", title="warm-up")
    ax.legend()
    fig.savefig(io.BytesIO(), dpi=100, format="png")


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
    evals = read_evaluations(log_dir)
    plot_curves([run], out_path, smooth_radius=smooth_radius, group_by="run", width=width, height=height,
                title=run.name, evaluations=None if evals is None else (evals["timesteps"], evals["return_mean"]))
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


def plot_ratings(timesteps: list[int], ratings: list[float], out_path: str, width: int = 800, height: int = 500) -> str:
    """Draw the Elo rating of each self-play snapshot against the env steps it was taken at; returns ``out_path``."""
    dpi = 100
    fig = _new_figure(width, height, dpi)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(timesteps, ratings, marker="o")
    ax.set_xlabel("env steps")
    ax.set_ylabel("Elo rating (random player = 0)")
    ax.set_title("self-play snapshots")
    ax.grid(True, alpha=0.3)
    _save_png(fig, out_path, dpi)
    return out_path

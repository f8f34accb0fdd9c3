"""Drawing learning curves (``common.logs.curves``) into PNG files; ``write_final_curve`` for a finished run.

matplotlib is imported only inside the drawing functions, so importing this module is cheap.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from common.logs.curves import (
    SPREAD_WORDS,
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

    The title names the algorithm and env of the runs (their config.json) unless ``title`` is given; the
    legend names each group with its number of runs and what the shaded band is.

    Args:
        runs: runs from ``load_run`` / ``find_runs``.
        out_path: the PNG to write (atomically; folders are created).
        smooth_radius: moving-average radius in points (episodes or log rows); 0 = raw.
        group_by: how runs form groups, see ``group_key``.
        spread: band drawn around each group's mean: "std", "ci95", "minmax" or "none".
        evaluations: (timesteps, evaluation mean returns) drawn beside the training curve, as points.

    Returns:
        The drawn curves, one per group.
    """
    curves = _curves(runs, smooth_radius, group_by, spread)
    fig = _new_figure(width, height, dpi)
    ax = fig.add_subplot()
    colors = _colors([c.label for c in curves])
    _draw(ax, curves, spread, colors)
    if evaluations is not None and len(evaluations[0]):
        ax.plot(evaluations[0], evaluations[1], "o-", color="black", markersize=3, linewidth=1,
                label="evaluation (deterministic)")
    _label_axes(ax, runs, smooth_radius)
    ax.set_title(title or describe_runs(runs) or "learning curves")
    _legend(fig, ax, spread, len(curves) > 1 or evaluations is not None)
    _save_png(fig, out_path, dpi)
    return curves


def plot_grid(
    runs: Sequence[Run],
    out_path: str,
    panel_by: GroupBy = "env",
    smooth_radius: int = 10,
    group_by: GroupBy = "alg",
    spread: str = "std",
    width: int = 1200,
    height: int = 800,
    dpi: int = 100,
    title: str | None = None,
) -> dict[str, list[Curve]]:
    """One panel per env (``panel_by``), in each one curve per algorithm (``group_by``), as benchmark figures
    compare algorithms; an algorithm keeps its colour in every panel. Returns the curves of each panel."""
    panels = group_runs(runs, panel_by)
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig = _new_figure(width, height, dpi)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    drawn = {name: _curves(members, smooth_radius, group_by, spread) for name, members in panels.items()}
    colors = _colors([c.label for curves in drawn.values() for c in curves])
    for ax, (name, curves) in zip(axes.flat, drawn.items()):
        _draw(ax, curves, spread, colors)
        _label_axes(ax, panels[name], smooth_radius)
        ax.set_title(name, fontsize="medium")
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(title or f"learning curves: {len(colors)} {_plural(group_by)} on {len(panels)} {_plural(panel_by)}")
    handles = {h.get_label(): h for ax in axes.flat for h in ax.get_legend_handles_labels()[0]}
    _legend(fig, None, spread, True, list(handles.values()))
    _save_png(fig, out_path, dpi)
    return drawn


def _plural(group_by: GroupBy) -> str:
    return {"alg": "algorithms", "env": "envs"}.get(group_by if isinstance(group_by, str) else "", "groups")


def _curves(runs: Sequence[Run], smooth_radius: int, group_by: GroupBy, spread: str) -> list[Curve]:
    """One aggregated curve per group; a group of one run is labelled by the run's folder name."""
    if not runs:
        raise ValueError("no runs to plot")
    named = group_by in ("alg", "env")  # a label from config.json stays, even for one run
    return [aggregate(label if len(members) > 1 or named else members[0].name, members, smooth_radius, spread)
            for label, members in group_runs(runs, group_by).items()]


def _colors(labels: Sequence[str]) -> dict[str, str]:
    """A colour per distinct label, in order of first appearance (tab10, then tab20 beyond 10)."""
    from matplotlib import colormaps

    distinct = list(dict.fromkeys(labels))
    cmap = colormaps["tab10" if len(distinct) <= 10 else "tab20"]
    return {label: cmap(i % cmap.N) for i, label in enumerate(distinct)}


def _draw(ax, curves: Sequence[Curve], spread: str, colors: dict[str, str]) -> None:
    """Each curve's mean, its band when it has several runs, labelled ``label (n runs)``."""
    for curve in curves:
        name = curve.label if curve.n_runs == 1 else f"{curve.label} ({curve.n_runs} runs)"
        ax.plot(curve.x, curve.mean, label=name, linewidth=1.5, color=colors[curve.label])
        if curve.n_runs > 1 and spread != "none":
            ax.fill_between(curve.x, curve.low, curve.high, color=colors[curve.label], alpha=0.2, linewidth=0)


def _label_axes(ax, runs: Sequence[Run], smooth_radius: int) -> None:
    """Axis titles with their units, whole-number step ticks written 200k, 1M."""
    from matplotlib.ticker import EngFormatter, MaxNLocator

    monitor = all(r.source == "monitor" for r in runs)
    what = "episode return" if monitor else "mean episode return (progress.csv)"
    unit = "episodes" if monitor else "log rows"
    smoothing = f", moving average of {2 * smooth_radius + 1} {unit}" if smooth_radius else ""
    ax.set_xlabel("environment steps (all envs)")
    ax.set_ylabel(what + smoothing, fontsize="small")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.grid(True, alpha=0.3)


def _legend(fig, ax, spread: str, show: bool, handles: list | None = None) -> None:
    """The legend: the groups, and what the shaded band is; beside the axes when there are many entries."""
    from matplotlib.patches import Patch

    handles = list(handles if handles is not None else ax.get_legend_handles_labels()[0])
    banded = any(c.get_label().endswith(" runs)") for c in handles)
    if banded and spread != "none":
        handles.append(Patch(color="grey", alpha=0.3, label=f"shaded: {SPREAD_WORDS[spread]} over runs"))
    if not (show or banded):
        return
    if ax is not None and len(handles) <= 6:
        ax.legend(handles=handles, loc="best", fontsize="small")
    else:
        fig.legend(handles=handles, loc="outside right upper", fontsize="x-small" if len(handles) > 12 else "small",
                   ncols=1 + len(handles) // 25)


def describe_runs(runs: Sequence[Run]) -> str | None:
    """``ppo2 on CartPole-v1``, ``CartPole-v1: ppo2, a2c`` or ``ppo2 on 3 envs`` from the runs' config.json;
    None when the runs do not say."""
    algs = list(dict.fromkeys(r.alg for r in runs if r.alg))
    envs = list(dict.fromkeys(r.env for r in runs if r.env))
    if not algs or not envs:
        return None
    if len(envs) == 1:
        return f"{algs[0]} on {envs[0]}" if len(algs) == 1 else f"{envs[0]}: {', '.join(algs)}"
    return f"{algs[0]} on {len(envs)} envs" if len(algs) == 1 else f"{len(algs)} algorithms on {len(envs)} envs"


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
    title = f"{describe_runs([run])} ({run.name})" if describe_runs([run]) else run.name
    plot_curves([run], out_path, smooth_radius=smooth_radius, group_by="run", width=width, height=height,
                title=title, evaluations=None if evals is None else (evals["timesteps"], evals["return_mean"]))
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

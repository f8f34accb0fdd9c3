"""Learning curves of one or more log folders as a PNG.

    python -m plot LOGDIR [LOGDIR ...] --out curves.png [--smooth 10] [--group auto]
                   [--spread std] [--source auto] [--grid none] [--width 800] [--height 500] [--title T]

Every folder below each LOGDIR that holds ``*.monitor.csv`` files or ``progress.csv`` is a
run; runs of one configuration (by default: the same folder name up to a trailing seed,
e.g. ``ppo2-cartpole-seed0`` and ``ppo2-cartpole-seed1``) are drawn as one mean curve with
a shaded spread. ``--group alg`` compares algorithms on one env; ``--grid env`` draws one panel
per env with one curve per algorithm (the runs' config.json say which), as benchmark figures do.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from common.errors import UserError
from common.logs import curves, plot_util
from run_util import check_writable_file


def arg_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m plot``."""
    p = argparse.ArgumentParser(prog="python -m plot", description=__doc__.split("\n\n")[0])
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR", help="log folders to search for runs")
    p.add_argument("--out", default="curves.png", help="PNG file to write (default: curves.png)")
    p.add_argument("--smooth", type=int, default=10,
                   help="moving-average radius in episodes / log rows, 0 = raw (default: 10)")
    p.add_argument("--group", default="auto",
                   help="how runs form groups: auto (folder name without a trailing seed), alg or env (the "
                        "run's config.json), parent (parent folder), run (no grouping) or a regular expression "
                        "on the run path (its first group is the label) (default: auto; alg with --grid)")
    p.add_argument("--spread", choices=curves.SPREADS, default="std",
                   help="band around a group's mean over its runs: std (mean +- 1 standard deviation), ci95 "
                        "(95%% confidence interval of the mean), minmax, none (default: std)")
    p.add_argument("--grid", choices=("none", "env", "alg"), default="none",
                   help="one panel per env (or per algorithm) of the runs' config.json (default: none)")
    p.add_argument("--source", choices=curves.SOURCES, default="auto",
                   help="monitor files, progress.csv, or auto: monitor files when present")
    p.add_argument("--width", type=int, default=None, help="image width in pixels (default: 800, 1200 with --grid)")
    p.add_argument("--height", type=int, default=None, help="image height in pixels (default: 500, 800 with --grid)")
    p.add_argument("--title", default=None, help="figure title (default: the algorithms and envs of the runs)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (0 on success, 2 on a user error)."""
    args = arg_parser().parse_args(argv)
    try:
        runs = curves.find_runs(args.logdirs, source=args.source)
        args.out = check_writable_file(args.out, "--out")  # never a device, a FIFO or a link replaced by the PNG
        panels = _draw(args, runs)
    except (ValueError, UserError) as e:  # NoDataError included
        print(f"plot: error: {e}", file=sys.stderr)
        return 2
    for panel, drawn in panels.items():
        for c in drawn:
            print(f"{panel}{c.label}: {c.n_runs} run(s), {c.x[-1]:.0f} timesteps, final mean return {c.mean[-1]:.2f}")
    print(f"wrote {args.out}")
    return 0


def _draw(args: argparse.Namespace, runs: list[curves.Run]) -> dict[str, list[curves.Curve]]:
    """Draw one figure or a grid of panels; the curves by panel ("" for one figure)."""
    size = {"width": args.width or 800, "height": args.height or 500}
    if args.grid == "none":
        return {"": plot_util.plot_curves(runs, args.out, smooth_radius=args.smooth, group_by=args.group,
                                          spread=args.spread, title=args.title, **size)}
    size = {"width": args.width or 1200, "height": args.height or 800}
    group = args.group if args.group != "auto" else ("alg" if args.grid == "env" else "env")
    drawn = plot_util.plot_grid(runs, args.out, panel_by=args.grid, smooth_radius=args.smooth, group_by=group,
                                spread=args.spread, title=args.title, **size)
    return {f"{panel}: ": curves_ for panel, curves_ in drawn.items()}


if __name__ == "__main__":
    sys.exit(main())

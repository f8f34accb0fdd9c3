"""Does the greedy policy stay solved once solved? Runs seeds through the runner and reads their evaluations.

    .venv/bin/python bench/stays_solved.py [--alg deepq] [--env CartPole-v1] [--steps 50000] [--eval_freq 2500]
        [--seeds 0 1 2 3 4] [--threshold 475] [--root /tmp/stays-solved] [--name base] [-- RUNNER FLAGS...]

Each seed is ``python -m run --alg=A --env=E --num_timesteps=N --seed=S --eval_freq=K --eval_episodes=10``
plus the flags after ``--``, in ``<root>/<name>/seed<S>`` (a finished run is read, not run again). Per seed it
prints the final evaluation, the step of the first evaluation at or above the threshold, and how many
evaluations from then on stayed at or above it; then the counts over seeds.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from common.logs.curves import read_evaluations


def evaluations(folder: str) -> list[tuple[int, float]]:
    """(env steps, mean return) of each evaluation in ``folder/evaluations.csv`` (none: [])."""
    cols = read_evaluations(folder)
    if cols is None:
        return []
    return list(zip(cols["timesteps"].astype(int).tolist(), cols["return_mean"].tolist(), strict=True))


def stays_solved(curve: list[tuple[int, float]], threshold: float) -> tuple[int | None, int, int]:
    """(step of the first evaluation >= threshold or None, evaluations >= threshold from it on, evaluations
    from it on)."""
    first = next((i for i, (_, v) in enumerate(curve) if v >= threshold), None)
    if first is None:
        return None, 0, 0
    after = [v for _, v in curve[first:]]
    return curve[first][0], sum(v >= threshold for v in after), len(after)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--alg", default="deepq")
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--steps", type=int, default=50_000)
    p.add_argument("--eval_freq", type=int, default=2_500)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--threshold", type=float, default=475.0)
    p.add_argument("--root", default="/tmp/stays-solved")
    p.add_argument("--name", default="shipped", help="folder name of this set of flags")
    p.add_argument("flags", nargs="*", help="runner flags (after --)")
    a = p.parse_args()
    totals = {"final": 0, "stay": 0, "kept": 0, "after": 0}
    for seed in a.seeds:
        folder = os.path.join(a.root, a.name, f"seed{seed}")
        expected = a.steps // a.eval_freq
        if len(evaluations(folder)) < expected:
            cmd = [sys.executable, "-m", "run", f"--alg={a.alg}", f"--env={a.env}", f"--num_timesteps={a.steps}",
                   f"--seed={seed}", f"--eval_freq={a.eval_freq}", "--eval_episodes=10", f"--log_path={folder}",
                   "--log_format=csv", "--no_progress", "--checkpoint_freq=0", *a.flags]
            subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        curve = evaluations(folder)
        first, kept, after = stays_solved(curve, a.threshold)
        final = curve[-1][1]
        totals["final"] += final >= a.threshold
        totals["stay"] += after > 0 and kept == after
        totals["kept"] += kept
        totals["after"] += after
        print(f"{a.name} seed {seed}: final {final:.1f}, first >= {a.threshold:g} at {first}, "
              f"{kept}/{after} evaluations >= {a.threshold:g} from then on", flush=True)
    n = len(a.seeds)
    print(f"{a.name}: final >= {a.threshold:g} on {totals['final']}/{n} seeds; stays solved on {totals['stay']}/{n}; "
          f"{totals['kept']}/{totals['after']} evaluations after the first solved one are solved")


if __name__ == "__main__":
    main()

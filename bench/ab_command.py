"""Wall time of one command in several checkouts of this repository, run alternately.

    .venv/bin/python bench/ab_command.py --trees /tmp/before . [--repeats 3] -- -m run --alg=deepq ...

Runs ``python ARGS`` with each tree as the working directory (the interpreter of this process, so the same
packages), tree after tree, ``--repeats`` times, output discarded; prints each time and the median per tree.
``{n}`` in an argument becomes the run's number (1, 2, ...), for log folders that must not exist yet.
Make the "before" tree with ``git worktree add /tmp/before <commit>``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def time_command(tree: str, args: list[str]) -> float:
    """Seconds of wall time of ``python args`` run in ``tree``; raises if the command fails."""
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=tree, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trees", nargs="+", required=True, help="checkouts to run the command in, in this order")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("args", nargs=argparse.REMAINDER, help="after --: the arguments of python")
    ns = p.parse_args(argv)
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    if not args:
        p.error("give the command after --")
    times: dict[str, list[float]] = {tree: [] for tree in ns.trees}
    n = 0
    for r in range(ns.repeats):
        for tree in ns.trees:
            n += 1
            times[tree].append(time_command(os.path.abspath(tree), [a.replace("{n}", str(n)) for a in args]))
            print(f"repeat {r + 1} {tree}: {times[tree][-1]:.1f} s", flush=True)
    for tree, ts in times.items():
        print(f"{tree}: median {statistics.median(ts):.1f} s ({', '.join(f'{t:.1f}' for t in ts)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

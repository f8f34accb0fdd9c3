"""Latency of one gradient-sized Allreduce: MPI's blocking call against ``mpi_util.allreduce_sum``.

    .venv/bin/python bench/mpi_collectives.py [--ranks 2] [--size 20000] [--calls 3000] [--repeats 3]

``mpi_util`` starts each collective non-blocking and tests it from Python (so that a signal can end the
wait); this measures what that costs against ``comm.Allreduce`` on the same float32 array, alternating
the two, ``--repeats`` times each. Prints microseconds per call for each repeat and the medians.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(size: int, calls: int, repeats: int) -> None:
    """Inside the job: time both kinds of Allreduce and print the medians on rank 0."""
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from common.mpi import mpi_util

    comm = mpi_util.get_comm()
    x = np.ones(size, np.float32)
    kinds = {"comm.Allreduce (blocking)": lambda: comm.Allreduce(x, np.empty_like(x)),
             "mpi_util.allreduce_sum": lambda: mpi_util.allreduce_sum(x)}
    times: dict[str, list[float]] = {name: [] for name in kinds}
    for _ in range(repeats):
        for name, call in kinds.items():
            mpi_util.barrier()
            start = time.perf_counter()
            for _ in range(calls):
                call()
            times[name].append((time.perf_counter() - start) / calls * 1e6)
    if mpi_util.is_root():
        for name, values in times.items():
            shown = ", ".join(f"{v:.1f}" for v in values)
            print(f"{name:28s} {statistics.median(values):7.1f} us per call (repeats: {shown})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--size", type=int, default=20_000, help="float32 values per Allreduce")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        measure(args.size, args.calls, args.repeats)
        return
    launcher = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if launcher is None:
        sys.exit("bench/mpi_collectives.py: mpiexec not found next to python or on PATH (pip install mpich mpi4py)")
    print(f"{args.ranks} ranks, {args.size} float32 values, {args.calls} calls x {args.repeats}; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    subprocess.run([launcher, "-n", str(args.ranks), sys.executable, __file__, "--inside", f"--size={args.size}",
                    f"--calls={args.calls}", f"--repeats={args.repeats}"], check=True)


if __name__ == "__main__":
    main()

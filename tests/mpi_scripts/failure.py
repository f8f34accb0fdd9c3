"""Run under `mpiexec -n 2 ... failure.py MODE`: rank 1 fails while rank 0 waits in a collective.

MODE "uncaught": rank 1 raises outside any guard (the excepthook installed by mpi_util must abort).
MODE "exit": rank 1 calls sys.exit(3) inside mpi_util.abort_on_failure().
Either way the job must end quickly with a non-zero status instead of hanging.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from common.mpi import mpi_util


def main(mode: str) -> None:
    if mpi_util.rank() == 1:
        if mode == "uncaught":
            raise RuntimeError("rank 1 failed on purpose")
        with mpi_util.abort_on_failure():
            print("rank 1 exits with a clean one-line error", file=sys.stderr, flush=True)
            sys.exit(3)
    mpi_util.allreduce_mean(np.zeros(4))  # would wait forever for rank 1
    print("rank 0 was not aborted", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])

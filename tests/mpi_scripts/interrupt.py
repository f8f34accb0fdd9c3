"""Run under `mpiexec -n 2 ... interrupt.py FOLDER`: rank 0 waits in a collective that rank 1 never joins.

Rank 0 writes its pid to FOLDER/rank0.pid and calls ``mpi_util.barrier()``; the test sends SIGTERM to
rank 0 alone. Inside ``termination_as_interrupt`` the wait must end with ``Terminated`` (a blocking MPI
call would wait for rank 1 for ever). Rank 1 stays in Python until rank 0 writes FOLDER/done.
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from common.mpi import mpi_util
from common.process.signals import Terminated, termination_as_interrupt


def main(folder: Path) -> None:
    with termination_as_interrupt():
        if mpi_util.rank() == 1:
            deadline = time.monotonic() + 30
            while not (folder / "done").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            os._exit(0)
        (folder / "rank0.pid").write_text(str(os.getpid()))
        try:
            mpi_util.barrier()
            print("rank 0 left the barrier", flush=True)
        except Terminated as e:
            print(f"rank 0 interrupted in the barrier by {e}", flush=True)
        (folder / "done").write_text("")
        time.sleep(0.5)  # rank 1 leaves first
        os._exit(0)


if __name__ == "__main__":
    main(Path(sys.argv[1]))

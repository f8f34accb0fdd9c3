"""Run under `mpiexec -n K`: `python train_and_hash.py OUT_DIR RUN_ARGS...`.

Trains with ``run.main(RUN_ARGS)`` and writes OUT_DIR/rank<r>.json with a sha256 of everything the
model saves (weights, optimizer state, normalisation statistics), a sha256 of the VecNormalize
statistics, the model's step count and the pids of this rank's remaining child processes (so the test
can check that none outlive the job). The test compares the files of all ranks.
"""

import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import run
from common.mpi import mpi_util
from tests.process_tree import descendants


def digest(arrays: dict) -> str:
    """sha256 over names, dtypes, shapes and bytes of named arrays, in name order."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def main() -> None:
    out_dir, args = sys.argv[1], sys.argv[2:]
    with mpi_util.abort_on_failure():
        model = run.main(args)
        vec_norm = getattr(model, "vec_normalize", None)
        record = {
            "rank": mpi_util.rank(),
            "size": mpi_util.size(),
            "weights": digest(model.get_arrays()),
            "num_arrays": len(model.get_arrays()),
            "vec_normalize": None if vec_norm is None else digest(vec_norm.get_state()),
            "num_timesteps": int(model.num_timesteps),
            "children": descendants(os.getpid()),
        }
        with open(os.path.join(out_dir, f"rank{mpi_util.rank()}.json"), "w") as f:
            json.dump(record, f)


if __name__ == "__main__":
    main()

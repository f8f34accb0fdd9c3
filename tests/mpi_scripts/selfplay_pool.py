"""Run under `mpiexec -n K`: `python selfplay_pool.py OUT_DIR RUN_ARGS...` (a ``--self_play`` run).

Trains with ``run.main(RUN_ARGS)`` while keeping the run's ``algos.selfplay.hook.SelfPlay``, then writes
OUT_DIR/rank<r>.json with the pool's snapshot names, its sampling chances and a sha256 of its weights,
and the learner's results against it (summed over ranks), so the test can compare the ranks' pools.
"""

import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import run
from algos.selfplay import hook
from common.mpi import mpi_util


def main() -> None:
    out_dir, args = sys.argv[1], sys.argv[2:]
    kept = []
    start = hook.start

    def keep(run_, hp):
        sp = start(run_, hp)
        kept.append(sp)
        return sp

    hook.start = keep
    with mpi_util.abort_on_failure():
        run.main(args)
        pool = kept[0].pool
        h = hashlib.sha256()
        for snap in pool.snapshots:
            for a in [*snap.weights.hidden, snap.weights.pi_w, snap.weights.pi_b]:
                h.update(np.ascontiguousarray(a).tobytes())
        record = {"names": pool.names(), "probs": pool.probs().tolist(), "weights": h.hexdigest(),
                  "results": [s.results.tolist() for s in pool.snapshots]}
        with open(os.path.join(out_dir, f"rank{mpi_util.rank()}.json"), "w") as f:
            json.dump(record, f)


if __name__ == "__main__":
    main()

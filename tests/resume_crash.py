"""Run ``python -m run`` and kill it with SIGKILL (no cleanup, as kill -9) at a chosen moment, for the
resume tests: ``python tests/resume_crash.py STEP [--in-checkpoint] -- RUN_ARGS...``.

Without ``--in-checkpoint`` the process kills itself at the first step count >= STEP (after that step's
checkpoints and evaluations); with it, in the middle of writing the first training-state checkpoint of a
step >= STEP (after its first array went into the temporary file).
"""
import os
import signal
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import run
from algos import training
from common.files import checkpoint


def _kill() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    split = sys.argv.index("--")
    options, run_args = sys.argv[1:split], sys.argv[split + 1:]
    kill_at = int(options[0])
    if "--in-checkpoint" in options:
        write_member = checkpoint._write_member
        original_save = training.TrainingRun.save_state

        def save_state(self, t):
            if t >= kill_at:
                def write_then_die(zf, name, array):
                    write_member(zf, name, array)
                    _kill()
                checkpoint._write_member = write_then_die
            original_save(self, t)

        training.TrainingRun.save_state = save_state
    else:
        original = training.TrainingRun.periodic

        def periodic(self, t_prev, t):
            original(self, t_prev, t)
            if t >= kill_at:
                _kill()

        training.TrainingRun.periodic = periodic
    run.main(run_args)


if __name__ == "__main__":
    main()

"""Run ``python -m run`` and kill it with SIGKILL (no cleanup, as kill -9) at a chosen moment, for the
resume tests: ``python tests/resume_crash.py STEP [--in-checkpoint | --signal=NAME] -- RUN_ARGS...``.

Without an option the process kills itself at the first step count >= STEP (after that step's
checkpoints and evaluations); with ``--in-checkpoint``, in the middle of writing the first training-state
checkpoint of a step >= STEP (after its first array went into the temporary file). With ``--signal=NAME``
it runs as the command line does and sends itself SIGINT, SIGTERM or SIGHUP once, from inside the env's
step that reaches STEP env steps (in the middle of a rollout).
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
    signal_name = next((o.split("=", 1)[1] for o in options if o.startswith("--signal=")), None)
    if signal_name is not None:
        from common.vec_env.dummy_vec_env import DummyVecEnv

        step_wait, stepped = DummyVecEnv.step_wait, [0]

        def step_then_signal(self):
            stepped[0] += self.num_envs
            if stepped[0] - self.num_envs < kill_at <= stepped[0]:
                os.kill(os.getpid(), getattr(signal, signal_name))
            return step_wait(self)

        DummyVecEnv.step_wait = step_then_signal
        sys.argv = ["run", *run_args]
        run.main()  # the command line: its signal handling and exit status
        return
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

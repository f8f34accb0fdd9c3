"""Start-up time of the runner: `.venv/bin/python bench/startup.py [--repeats 5] [--phases]`.

Prints the median (and min, max) over ``--repeats`` interleaved runs of each whole command, with
``import tensorflow`` beside them as the floor a TensorFlow run cannot go under:

- ``python -c pass`` (the interpreter), ``python -c "import tensorflow"`` (the floor), and the same import
  as the runner does it (``common/process/startup.py``: chatter filtered, Keras preload skipped),
- ``python -m run --help`` (target < 0.5 s),
- ``python -m run --alg=ppo2 --env=CartPole-v1 --num_timesteps=256`` (target < 3 s on a quiet machine).

``--pythons A B`` times each command under each interpreter, interleaved (for instance two venvs, one with
the ``tensorflow`` wheel and one with ``tensorflow-cpu``); the default is this interpreter alone.

``--phases`` then runs the 256-step command once in this process and prints where its time goes: importing
the runner, the algorithm (TensorFlow), resolving the settings, the first fused update (tracing + XLA
compilation), the other updates, and the learning curve. The load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_256 = ["-m", "run", "--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=256", "--no_progress"]
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "import tensorflow (floor)": ["-c", "import tensorflow"],
    "import tensorflow the runner's way": ["-c", ("from common import startup; startup.quiet_tensorflow([]); "
                                                 "import tensorflow")],
    "run --help": ["-m", "run", "--help"],
    "run ppo2 CartPole-v1 256 steps": RUN_256,
}


def time_commands(repeats: int, pythons: list[str]) -> dict[str, list[float]]:
    """Seconds of each command under each interpreter, ``repeats`` rounds interleaved; keys name the
    interpreter too when there are several."""
    label = (lambda py, name: f"{name} [{py}]") if len(pythons) > 1 else (lambda py, name: name)
    times: dict[str, list[float]] = {label(py, name): [] for name in COMMANDS for py in pythons}
    for _ in range(repeats):
        for name, args in COMMANDS.items():
            for py in pythons:
                with tempfile.TemporaryDirectory() as logs:
                    extra = [f"--log_path={logs}"] if args is RUN_256 else []
                    t0 = time.perf_counter()
                    out = subprocess.run([py, *args, *extra], cwd=ROOT, capture_output=True, check=False)
                    times[label(py, name)].append(time.perf_counter() - t0)
                if out.returncode != 0:
                    raise SystemExit(f"startup: {name} under {py} failed:\n{out.stderr.decode()[-2000:]}")
    return times


def phases() -> None:
    """One 256-step run in this process, with the time of each phase."""
    t0 = time.perf_counter()
    sys.path.insert(0, ROOT)
    import run
    from runner import app
    t_run = time.perf_counter()
    from algos.ppo2 import model as ppo2_model
    t_alg = time.perf_counter()
    calls: list[float] = []
    curve: list[float] = []
    train, write_curve = ppo2_model.PPO2Model.train, app._write_learning_curve

    def timed_train(self, *a: Any, **k: Any) -> dict[str, float]:
        s = time.perf_counter()
        try:
            return train(self, *a, **k)
        finally:
            calls.append(time.perf_counter() - s)

    def timed_curve(*a: Any, **k: Any) -> None:
        s = time.perf_counter()
        try:
            return write_curve(*a, **k)
        finally:
            curve.append(time.perf_counter() - s)

    ppo2_model.PPO2Model.train, app._write_learning_curve = timed_train, timed_curve
    with tempfile.TemporaryDirectory() as logs, open(os.devnull, "w") as null:
        saved, sys.stdout = sys.stdout, null
        try:
            t_main = time.perf_counter()
            run.main([*RUN_256[2:], f"--log_path={logs}"])
            t_end = time.perf_counter()
        finally:
            sys.stdout = saved
    rest = t_end - t_main - sum(calls) - sum(curve)
    print(f"phases (one run in-process): import run {t_run - t0:.2f} s | import the algorithm + TensorFlow "
          f"{t_alg - t_run:.2f} s | first update (trace + compile) {calls[0]:.2f} s | other {len(calls) - 1} "
          f"updates {sum(calls[1:]):.2f} s | learning curve {sum(curve):.2f} s | the rest (env, model build, "
          f"rollouts, logging, save) {rest:.2f} s | whole {t_end - t0:.2f} s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--phases", action="store_true", help="also print one in-process run's phases")
    p.add_argument("--pythons", nargs="+", default=[sys.executable],
                   help="interpreters to time each command under, interleaved (default: this one)")
    args = p.parse_args()
    load = os.getloadavg()
    times = time_commands(args.repeats, args.pythons)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average before "
          f"{load[0]:.2f}, after {os.getloadavg()[0]:.2f}; median of {args.repeats} interleaved runs")
    print("| command | median | min | max |\n| --- | ---: | ---: | ---: |")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(ts):.2f} s | {min(ts):.2f} s | {max(ts):.2f} s |")
    if args.phases:
        phases()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Resuming after kill -9, measured: ``.venv/bin/python bench/resume.py {pendulum,buffer}``.

``pendulum``: sac on Pendulum-v1, 20k env steps, seed 0 (the shipped entry; final deterministic evaluation
over 10 episodes by the runner's evaluator at step 20,000, as the uninterrupted seeds in bench/README.md),
killed with SIGKILL 3 times at random moments (a random 0-60 s after a checkpoint newer than the last
resume point appeared) and resumed with ``--resume`` each time. Prints each resume line, the steps lost in
all (bound: 3 checkpoint intervals) and the final evaluation.

``buffer``: a training-state checkpoint holding a full 1M-transition replay buffer of a MuJoCo-sized task
(observations 17 floats, actions 6): seconds to write and to read back, size on disk, and the largest extra
memory the write and the read allocated (tracemalloc), against the buffer's own size.
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def pendulum(args: argparse.Namespace) -> None:
    from common.files.checkpoint import checkpoints

    log = os.path.abspath(args.log or tempfile.mkdtemp(prefix="resume-bench-"))
    argv = ["--alg=sac", "--env=Pendulum-v1", "--num_timesteps=20000", f"--seed={args.seed}",
            "--eval_freq=20000", "--eval_episodes=10", f"--checkpoint_freq={args.checkpoint_freq}",
            f"--log_path={log}", f"--save_path={log}/model.zip", "--log_format=csv,log", "--no_progress"]
    rng = np.random.default_rng(args.kill_seed)
    t0 = time.perf_counter()
    lost, kills = 0, 0
    command = argv
    while True:
        newest = ([s for s, _ in checkpoints(os.path.join(log, "resume"), 0)] or [-1])[0]
        proc = subprocess.Popen([sys.executable, "-m", "run", *command], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        if kills < args.kills:
            while proc.poll() is None:  # a checkpoint newer than the one resumed from, then a random delay
                steps = [s for s, _ in checkpoints(os.path.join(log, "resume"), 0)]
                if steps and steps[0] > newest:
                    break
                time.sleep(1.0)
            time.sleep(float(rng.uniform(0.0, 60.0)))
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
        out, _ = proc.communicate()
        found = re.search(r"resumed from step (\d+) \((\d+) steps lost\)", out)
        if found:
            print(found.group(0), flush=True)
            lost += int(found.group(2))
        if proc.returncode == 0:
            break
        if proc.returncode != -signal.SIGKILL:
            sys.exit(f"run failed ({proc.returncode}):\n{out[-3000:]}")
        print(f"killed (kill {kills}) after {time.perf_counter() - t0:.0f} s", flush=True)
        command = [f"--resume={log}"]
    with open(os.path.join(log, "evaluations.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    final = rows[-1]
    print(f"kills: {kills}; steps lost in all: {lost} (bound 3 x {args.checkpoint_freq} = "
          f"{3 * args.checkpoint_freq}): {'ok' if lost <= 3 * args.checkpoint_freq else 'EXCEEDED'}")
    print(f"final deterministic evaluation at {final['timesteps']} steps, {final['episodes']} episodes: "
          f"{float(final['return_mean']):.1f}; evaluations.csv rows: {len(rows)}; wall {time.perf_counter() - t0:.0f} s")


def buffer(args: argparse.Namespace) -> None:
    from common.buffers.replay import ReplayBuffer
    from common.files.checkpoint import GeneratorState, read_state, write_checkpoint
    from common.files.checkpoint import open_checkpoint as open_file

    n, rng = args.transitions, np.random.default_rng(0)
    replay = ReplayBuffer(n, (17,), (6,), np.float32, np.float32)
    for start in range(0, n, 100_000):
        k = min(100_000, n - start)
        replay.add(rng.standard_normal((k, 17), np.float32), rng.uniform(-1, 1, (k, 6)).astype(np.float32),
                   rng.standard_normal(k).astype(np.float32), rng.standard_normal((k, 17), np.float32),
                   np.zeros(k, np.float32))
    held = sum(a.nbytes for a in (replay.obs, replay.next_obs, replay.actions, replay.rewards, replay.dones))
    weights = {"actor/w": rng.standard_normal((256, 256)).astype(np.float32)}
    folder = args.folder or tempfile.mkdtemp(prefix="resume-buffer-")
    path = os.path.join(folder, "0001000000-rank0.zip")
    meta = {"algorithm": "sac", "step": n}
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    seconds = write_checkpoint(path, meta, weights, {"buffer": replay.state(),
                                                      "rng": GeneratorState(rng).state()})
    write_extra = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    opened = open_file(path)  # checks every member's CRC
    fresh = ReplayBuffer(n, (17,), (6,), np.float32, np.float32)
    _, states = read_state(opened, weights, {"buffer": fresh})
    fresh.load_state(states["buffer"])
    read_seconds = time.perf_counter() - t0
    read_extra = tracemalloc.get_traced_memory()[1] - base - fresh.obs.nbytes * 2 - fresh.actions.nbytes \
        - fresh.rewards.nbytes - fresh.dones.nbytes
    tracemalloc.stop()
    assert np.array_equal(fresh.obs, replay.obs) and len(fresh) == len(replay)
    size = os.path.getsize(path)
    print(f"1M-transition buffer (obs 17, act 6, float32): {held / 2**20:.1f} MiB in memory")
    print(f"write: {seconds:.2f} s, {size / 2**20:.1f} MiB on disk ({size / seconds / 2**20:.0f} MiB/s), "
          f"largest extra allocation while writing {write_extra / 2**20:.1f} MiB")
    print(f"read back (CRC check of every member, then arrays into a fresh buffer): {read_seconds:.2f} s, "
          f"extra allocation beyond the fresh buffer {read_extra / 2**20:.1f} MiB")
    os.unlink(path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = p.add_subparsers(dest="what", required=True)
    pend = sub.add_parser("pendulum")
    pend.add_argument("--seed", type=int, default=0)
    pend.add_argument("--kills", type=int, default=3)
    pend.add_argument("--kill_seed", type=int, default=0)
    pend.add_argument("--checkpoint_freq", type=int, default=2000)
    pend.add_argument("--log", default=None)
    buf = sub.add_parser("buffer")
    buf.add_argument("--transitions", type=int, default=1_000_000)
    buf.add_argument("--folder", default=None)
    args = p.parse_args()
    {"pendulum": pendulum, "buffer": buffer}[args.what](args)


if __name__ == "__main__":
    main()

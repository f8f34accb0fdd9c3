"""Time per gradient step of deepq's heads: `.venv/bin/python bench/distributional_step.py [--repeats 7] [--atari]`.

Times ``DQNModel.train`` on random batches of 32 with each algorithm's shipped model defaults on the default
network (mlp 64x64, tanh) over an 8-dim observation and 4 actions: deepq (expected Q-values), qrdqn (200
quantiles, and 51), rainbow (C51's 51 atoms, noisy dueling streams of 512, double Q, n-step discounts and
prioritized-replay weights). Calls run 1 gradient step (the defaults' ``gradient_steps``) and blocks of 16;
the cases alternate within each repeat and the median is printed, with the first call (tracing, compiling)
and the load average. ``--atari`` adds deepq and qrdqn on conv_only over 84x84x4 uint8 frames.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common.process import startup

startup.quiet_tensorflow()

import numpy as np
from gymnasium import spaces

from algos.deepq.model import DQNModel
from algos.qrdqn.model import QRDQNModel
from algos.rainbow.model import RainbowModel
from common.nn.tf_util import configure_threads

BATCH, ACTIONS = 32, 4
# name: (model class, settings); each uses its algorithm's shipped [defaults] otherwise
MLP_CASES = {
    "deepq": (DQNModel, {}),
    "qrdqn 200 quantiles": (QRDQNModel, {}),
    "qrdqn 51 quantiles": (QRDQNModel, {"num_quantiles": 51}),
    "rainbow c51 51 atoms": (RainbowModel, {}),
}
ATARI_CASES = {
    "deepq atari": (DQNModel, {"network": "conv_only"}),
    "qrdqn 200 atari": (QRDQNModel, {"network": "conv_only"}),
}


def batch(space: spaces.Box, steps: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``steps`` random batches as the replay buffer samples them (with rainbow's extras)."""
    shape = (steps, BATCH)
    if space.dtype == np.uint8:
        obs, next_obs = (rng.integers(0, 256, shape + space.shape, np.uint8) for _ in range(2))
    else:
        obs, next_obs = (rng.normal(size=shape + space.shape).astype(np.float32) for _ in range(2))
    return {"obs": obs, "actions": rng.integers(0, ACTIONS, shape), "next_obs": next_obs,
            "rewards": rng.normal(size=shape).astype(np.float32),
            "dones": (rng.random(shape) < 0.05).astype(np.float32),
            "weights": rng.uniform(0.5, 1.0, shape).astype(np.float32),
            "discounts": np.full(shape, 0.99 ** 3, np.float32)}


def time_cases(cases: dict, space: spaces.Box, blocks: list[int], repeats: int, calls: int) -> None:
    """Print each case's median ms per gradient step for every block size."""
    rng = np.random.default_rng(0)
    models, first = {}, {}
    for name, (cls, settings) in cases.items():
        models[name] = cls(space, spaces.Discrete(ACTIONS), seed=0, **settings)
        t = time.perf_counter()
        for k in blocks:
            models[name].train(batch(space, k, rng), 1e-4)
        first[name] = time.perf_counter() - t
    for k in blocks:
        data = batch(space, k, rng)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(repeats):
            for name, model in models.items():
                t = time.perf_counter()
                for _ in range(calls):
                    model.train(data, 1e-4)
                times[name].append((time.perf_counter() - t) / (calls * k) * 1e3)
        for name in cases:
            print(f"{name:22s} {k:3d} steps per call: {statistics.median(times[name]):7.3f} ms per gradient step "
                  f"(first calls {first[name]:.2f} s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7, help="timings per case (the median is printed)")
    p.add_argument("--calls", type=int, default=10, help="train calls per timing")
    p.add_argument("--blocks", type=int, nargs="+", default=[1, 16], help="gradient steps per call")
    p.add_argument("--atari", action="store_true", help="also deepq and qrdqn on conv_only over 84x84x4")
    p.add_argument("--only", default="", help="only the cases whose name contains this text (e.g. rainbow)")
    args = p.parse_args(argv)
    mlp_cases = {name: case for name, case in MLP_CASES.items() if args.only in name}
    atari_cases = {name: case for name, case in ATARI_CASES.items() if args.only in name}
    configure_threads()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    time_cases(mlp_cases, spaces.Box(-1.0, 1.0, (8,), np.float32), args.blocks, args.repeats, args.calls)
    if args.atari:
        time_cases(atari_cases, spaces.Box(0, 255, (84, 84, 4), np.uint8), args.blocks, max(args.repeats // 2, 1),
                   max(args.calls // 5, 1))
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

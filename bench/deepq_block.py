"""deepq's training block with and without XLA: `.venv/bin/python bench/deepq_block.py [--repeats 5]`.

Times ``DQNModel.train`` on random CartPole-shaped batches (blocks of 128 gradient steps at batch 64, the
CartPole entry's 256x256 relu mlp), for the plain DQN head and the shipped dueling / double-Q one, XLA off and
on, alternating; prints each first call (tracing, compiling) and the median ms per gradient step.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gymnasium as gym
import numpy as np

from algos.deepq.model import DQNModel

STEPS, BATCH = 128, 64


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="timings (of 5 blocks each) per setting")
    args = p.parse_args(argv)
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(0)
    batch = {"obs": rng.normal(size=(STEPS, BATCH, 4)).astype(np.float32),
             "actions": rng.integers(0, 2, (STEPS, BATCH)),
             "rewards": np.ones((STEPS, BATCH), np.float32),
             "next_obs": rng.normal(size=(STEPS, BATCH, 4)).astype(np.float32),
             "dones": np.zeros((STEPS, BATCH), np.float32)}
    net = {"num_layers": 2, "num_hidden": 256, "activation": "relu"}
    for head in ({"dueling": False, "double_q": False}, {"dueling": True, "double_q": True}):
        models, first = {}, {}
        for jit in (False, True):
            models[jit] = DQNModel(env.observation_space, env.action_space, network="mlp", network_kwargs=net,
                                   hiddens=[], seed=0, jit_compile=jit, **head)
            t = time.perf_counter()
            models[jit].train(batch, 1e-3)
            first[jit] = time.perf_counter() - t
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for jit, model in models.items():
                t = time.perf_counter()
                for _ in range(5):
                    model.train(batch, 1e-3)
                times[jit].append((time.perf_counter() - t) / (5 * STEPS) * 1e3)
        plain, xla = statistics.median(times[False]), statistics.median(times[True])
        print(f"{head}: {plain:.3f} ms per gradient step, XLA {xla:.3f} ms ({plain / xla:.2f}x); first call "
              f"{first[False]:.2f} s, XLA {first[True]:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

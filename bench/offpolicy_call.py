"""The cost of one call of an off-policy model's fused update when a block is one gradient step (sac and td3
with ``train_freq=1, gradient_steps=1``): ``model.train`` through tf.function's polymorphic call (argument
binding in Python) against ``common.nn.direct_call.DirectCall`` (the traced graph called flat), alternating in one
process.

    .venv/bin/python bench/offpolicy_call.py [--algs sac td3] [--rounds 8] [--calls 200] [--jit]

prints, per algorithm on Pendulum-v1's spaces with its default network, the median over rounds of ms per
``model.train`` call for both paths (batches of 256 already sampled).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from bench.ddpg_floor import model_class, random_batch


def compare(alg: str, rounds: int, calls: int, jit: bool) -> dict[str, float]:
    """Median ms per ``model.train`` call: {"polymorphic": ..., "direct": ...}."""
    import gymnasium as gym

    env = gym.make("Pendulum-v1")
    model = model_class(alg)(env.observation_space, env.action_space, seed=0, jit_compile=jit)
    batch = random_batch(np.random.default_rng(0), 1, 256, model.obs_dim, model.act_dim)  # one gradient step
    model.train(batch)  # traces
    paths = {"polymorphic": model._train, "direct": model._train_direct}
    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, fn in paths.items():
            model._train_direct = fn
            t = time.perf_counter()
            for _ in range(calls):
                model.train(batch)
            times[name].append((time.perf_counter() - t) / calls * 1e3)
    return {name: float(np.median(v)) for name, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algs", nargs="+", default=["sac", "td3"], choices=["ddpg", "sac", "td3"])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--jit", action="store_true", help="compile the update with XLA")
    args = p.parse_args(argv)
    for alg in args.algs:
        ms = compare(alg, args.rounds, args.calls, args.jit)
        print(f"{alg} (XLA {'on' if args.jit else 'off'}): model.train, one gradient step per call: polymorphic "
              f"{ms['polymorphic']:.2f} ms, direct {ms['direct']:.2f} ms ({ms['polymorphic'] / ms['direct']:.2f}x); "
              f"median of {args.rounds} rounds of {args.calls} calls", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

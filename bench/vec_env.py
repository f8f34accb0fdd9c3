"""Throughput of the vectorized envs: env-steps per second, median of several repeats, in one run.

    .venv/bin/python bench/vec_env.py [--quick]

Prints a table and the three target ratios (pass/fail):
  SubprocVecEnv (best in_series) >= 3x gymnasium AsyncVectorEnv(shared_memory=True), CartPole-v1, 8 envs;
  DummyVecEnv >= 0.9x a hand loop over the same 8 envs;
  SubprocVecEnv (2 workers) >= 1.7x DummyVecEnv on CpuBurn-v0 at 1 ms per step, 8 envs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common.vec_env import DummyVecEnv, SubprocVecEnv  # noqa: E402

N_ENVS = 8


def cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


def cpu_burn() -> gym.Env:
    return gym.make("envs:CpuBurn-v0", burn_s=1e-3)


def _median_rate(run: Callable[[], None], steps: int, repeats: int) -> float:
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        rates.append(steps * N_ENVS / (time.perf_counter() - t0))
    return statistics.median(rates)


def bench_hand_loop(make: Callable[[], gym.Env], actions: np.ndarray, repeats: int) -> float:
    env_list = [make() for _ in range(N_ENVS)]
    for i, env in enumerate(env_list):
        env.reset(seed=i)

    def run() -> None:
        for row in actions:
            for env, a in zip(env_list, row):
                _, _, terminated, truncated, _ = env.step(a)
                if terminated or truncated:
                    env.reset()

    return _median_rate(run, len(actions), repeats)


def bench_vec(venv, actions: np.ndarray, repeats: int) -> float:
    venv.seed(0)
    venv.reset()

    def run() -> None:
        for row in actions:
            venv.step(row)

    try:
        run_ = run
        run_()  # warm-up
        return _median_rate(run_, len(actions), repeats)
    finally:
        venv.close()


def bench_gym_async(make: Callable[[], gym.Env], actions: np.ndarray, repeats: int) -> float:
    venv = gym.vector.AsyncVectorEnv([make] * N_ENVS, shared_memory=True)
    venv.reset(seed=0)

    def run() -> None:
        for row in actions:
            venv.step(row)

    try:
        run()
        return _median_rate(run, len(actions), repeats)
    finally:
        venv.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats (noisier)")
    args = parser.parse_args(argv)
    steps, repeats = (500, 3) if args.quick else (3000, 5)
    burn_steps = 40 if args.quick else 150
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, (steps, N_ENVS))
    burn_actions = rng.integers(0, 2, (burn_steps, N_ENVS))

    rows: dict[str, float] = {}
    rows["CartPole hand loop (in-process)"] = bench_hand_loop(cartpole, actions, repeats)
    rows["CartPole DummyVecEnv"] = bench_vec(DummyVecEnv([cartpole] * N_ENVS), actions, repeats)
    rows["CartPole gymnasium AsyncVectorEnv(shm)"] = bench_gym_async(cartpole, actions, repeats)
    for k in (1, 2, 4, 8):
        rows[f"CartPole SubprocVecEnv in_series={k}"] = bench_vec(
            SubprocVecEnv([cartpole] * N_ENVS, in_series=k), actions, repeats)
    rows["CpuBurn 1ms DummyVecEnv"] = bench_vec(DummyVecEnv([cpu_burn] * N_ENVS), burn_actions, repeats)
    rows["CpuBurn 1ms SubprocVecEnv 2 workers"] = bench_vec(
        SubprocVecEnv([cpu_burn] * N_ENVS, in_series=N_ENVS // 2), burn_actions, repeats)

    print(f"{'configuration':<44}{'env-steps/s':>14}")
    for name, rate in rows.items():
        print(f"{name:<44}{rate:>14,.0f}")
    best_k, best_sub = max(((k, rows[f"CartPole SubprocVecEnv in_series={k}"]) for k in (1, 2, 4, 8)),
                           key=lambda kv: kv[1])
    ratios = [
        (f"Subproc(in_series={best_k}) / gym AsyncVectorEnv", best_sub / rows["CartPole gymnasium AsyncVectorEnv(shm)"], 3.0),
        ("DummyVecEnv / hand loop", rows["CartPole DummyVecEnv"] / rows["CartPole hand loop (in-process)"], 0.9),
        ("CpuBurn Subproc(2 workers) / Dummy", rows["CpuBurn 1ms SubprocVecEnv 2 workers"] / rows["CpuBurn 1ms DummyVecEnv"], 1.7),
    ]
    print()
    ok = True
    for name, ratio, target in ratios:
        passed = ratio >= target
        ok &= passed
        print(f"{name:<48}{ratio:>6.2f}x  (target >= {target}x)  {'PASS' if passed else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

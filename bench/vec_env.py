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

from common.vec_env import DummyVecEnv, SubprocVecEnv

N_ENVS = 8


def cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


def cpu_burn() -> gym.Env:
    return gym.make("envs:CpuBurn-v0", burn_s=1e-3)


def hand_loop_runner(make: Callable[[], gym.Env], actions: np.ndarray) -> tuple[Callable[[], None], Callable[[], None]]:
    """(run, close) stepping the envs by hand: step, reset if done."""
    env_list = [make() for _ in range(N_ENVS)]
    for i, env in enumerate(env_list):
        env.reset(seed=i)

    def run() -> None:
        for row in actions:
            for env, a in zip(env_list, row):
                _, _, terminated, truncated, _ = env.step(a)
                if terminated or truncated:
                    env.reset()

    return run, lambda: [env.close() for env in env_list]


def vec_runner(venv, actions: np.ndarray, gym_vector: bool = False) -> tuple[Callable[[], None], Callable[[], None]]:
    """(run, close) stepping a vec env (ours, or a gymnasium.vector env) through ``actions``."""
    if gym_vector:
        venv.reset(seed=0)
    else:
        venv.seed(0)
        venv.reset()

    def run() -> None:
        for row in actions:
            venv.step(row)

    return run, venv.close


def measure(runners: dict[str, tuple[Callable[[], None], Callable[[], None]]], steps: int,
            repeats: int) -> dict[str, float]:
    """Median env-steps/s of each runner; repeats are interleaved so load changes hit all alike."""
    rates: dict[str, list[float]] = {name: [] for name in runners}
    try:
        for name, (run, _) in runners.items():
            run()  # warm-up
        for _ in range(repeats):
            for name, (run, _) in runners.items():
                t0 = time.perf_counter()
                run()
                rates[name].append(steps * N_ENVS / (time.perf_counter() - t0))
    finally:
        for _, close in runners.values():
            close()
    return {name: statistics.median(r) for name, r in rates.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats (noisier)")
    args = parser.parse_args(argv)
    steps, repeats = (500, 3) if args.quick else (2000, 7)
    burn_steps = 40 if args.quick else 150
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, (steps, N_ENVS))
    burn_actions = rng.integers(0, 2, (burn_steps, N_ENVS))

    rows: dict[str, float] = {}
    rows.update(measure({
        "CartPole hand loop (in-process)": hand_loop_runner(cartpole, actions),
        "CartPole DummyVecEnv": vec_runner(DummyVecEnv([cartpole] * N_ENVS), actions),
    }, steps, repeats))
    subprocs = {f"CartPole SubprocVecEnv in_series={k}": vec_runner(SubprocVecEnv([cartpole] * N_ENVS, in_series=k),
                                                                    actions) for k in (1, 2, 4, 8)}
    rows.update(measure({
        "CartPole gymnasium AsyncVectorEnv(shm)": vec_runner(
            gym.vector.AsyncVectorEnv([cartpole] * N_ENVS, shared_memory=True), actions, gym_vector=True),
        **subprocs,
    }, steps, repeats))
    rows.update(measure({
        "CpuBurn 1ms DummyVecEnv": vec_runner(DummyVecEnv([cpu_burn] * N_ENVS), burn_actions),
        "CpuBurn 1ms SubprocVecEnv 2 workers": vec_runner(
            SubprocVecEnv([cpu_burn] * N_ENVS, in_series=N_ENVS // 2), burn_actions),
    }, burn_steps, repeats))

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

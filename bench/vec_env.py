"""Throughput of the vectorized envs: env-steps per second, median of several repeats, in one run.

    .venv/bin/python bench/vec_env.py [--quick]
    .venv/bin/python bench/vec_env.py --envpool [--quick]   # needs requirements-envpool.txt

Prints a table and the three target ratios (pass/fail):
  SubprocVecEnv (best in_series) >= 3x gymnasium AsyncVectorEnv(shared_memory=True), CartPole-v1, 8 envs;
  DummyVecEnv >= 0.9x a hand loop over the same 8 envs;
  SubprocVecEnv (2 workers) >= 1.7x DummyVecEnv on CpuBurn-v0 at 1 ms per step, 8 envs.
With --envpool instead: --vec_env=envpool against our SubprocVecEnv (its automatic in_series) and DummyVecEnv,
each as the runner builds it (make_vec_env: Atari wrappers, Monitor), for PongNoFrameskip-v4, HalfCheetah-v5
and CartPole-v1, 8 envs, random actions; and envpool's ratio to each.
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

from common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

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


def vec_runner(venv: VecEnv | gym.vector.VectorEnv, actions: np.ndarray,
               gym_vector: bool = False) -> tuple[Callable[[], None], Callable[[], None]]:
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


# (env id, env type, steps per repeat, quick steps per repeat): about a second per repeat for the slowest kind
ENVPOOL_CASES = (("PongNoFrameskip-v4", "atari", 300, 60), ("HalfCheetah-v5", "mujoco", 300, 60),
                 ("CartPole-v1", "classic_control", 3000, 500))
ENVPOOL_KINDS = ("envpool", "subproc", "dummy")


def random_actions(space: gym.Space, steps: int, seed: int = 0) -> np.ndarray:
    """``steps`` rows of ``N_ENVS`` random actions of ``space`` (Discrete or Box)."""
    rng = np.random.default_rng(seed)
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(0, space.n, (steps, N_ENVS))
    return rng.uniform(space.low, space.high, (steps, N_ENVS, *space.shape)).astype(space.dtype)


def envpool_main(quick: bool) -> int:
    """envpool against our vec envs, one table row per env and kind, then envpool's ratios."""
    from runner.env_factory import make_vec_env

    repeats = 3 if quick else 7
    rows: dict[tuple[str, str], float] = {}
    for env_id, env_type, full_steps, quick_steps in ENVPOOL_CASES:
        steps = quick_steps if quick else full_steps
        venvs = {kind: make_vec_env(env_id, env_type, N_ENVS, 0, vec_env_kind=kind, logger_dir="")
                 for kind in ENVPOOL_KINDS}
        actions = random_actions(venvs["dummy"].action_space, steps)
        rates = measure({kind: vec_runner(venv, actions) for kind, venv in venvs.items()}, steps, repeats)
        rows.update({(env_id, kind): rate for kind, rate in rates.items()})
    print(f"{'env':<22}{'vec env':<12}{'env-steps/s':>14}")
    for (env_id, kind), rate in rows.items():
        print(f"{env_id:<22}{kind:<12}{rate:>14,.0f}")
    print()
    for env_id, *_ in ENVPOOL_CASES:
        envpool = rows[(env_id, "envpool")]
        print(f"{env_id:<22}envpool / subproc {envpool / rows[(env_id, 'subproc')]:>6.2f}x   "
              f"envpool / dummy {envpool / rows[(env_id, 'dummy')]:>6.2f}x")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats (noisier)")
    parser.add_argument("--envpool", action="store_true", help="envpool against our vec envs (Pong, HalfCheetah, "
                        "CartPole) instead of the targets")
    args = parser.parse_args(argv)
    if args.envpool:
        return envpool_main(args.quick)
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

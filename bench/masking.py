"""ppo2's training speed with and without action masking on CartPole-v1 (8 envs, the shipped CartPole entry).

    .venv/bin/python bench/masking.py [--steps 40000] [--repeats 3] [--vec_env dummy|subproc] [--rollout]

"masked": every env wrapped in ``envs.wrappers:AllLegalMasks`` (an ``action_masks()`` that allows both
actions), so the runner reads a mask every step (in the env workers, through the step's info), masks the
logits, stores the masks in the rollout and uses them in the update; "plain": the same env without it.
Runs alternate (plain, masked, plain, ...) and each prints its env steps per second over the whole
``learn`` call (rollouts, updates, logging; the TF tracing of the first update included, the same for both).
Prints the median of each and the cost of masking, target <= 10%, per wall-clock second and per CPU second.
``--rollout``: rollout collection alone instead (no update; where masking costs most), wall-clock and CPU
microseconds per env step over ``10 * repeats`` interleaved rollouts.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from common.process import startup

startup.quiet_tensorflow()  # TensorFlow imported the way run.py imports it
from algos.hyperparameters import shipped_entry
from algos.ppo2 import ppo2
from common.logs import logger
from runner.env_factory import make_vec_env

MASK_WRAPPER = "envs.wrappers:AllLegalMasks"


def steps_per_second(masked: bool, steps: int, vec_env: str, seed: int) -> tuple[float, float]:
    """Env steps per second of one ppo2 ``learn`` on CartPole-v1: per wall-clock second, and per CPU second
    of this process (``time.process_time``: less disturbed by other processes on a busy machine; the env
    workers' CPU time is not in it with --vec_env=subproc)."""
    env = make_vec_env("CartPole-v1", "classic_control", 8, seed=seed, vec_env_kind=vec_env, logger_dir="",
                       in_series=4 if vec_env == "subproc" else 1, user_wrappers=(MASK_WRAPPER,) if masked else ())
    try:
        kw = {**shipped_entry("ppo2", env_id="CartPole-v1"), "network": "mlp", "log_interval": 10**9}
        with tempfile.TemporaryDirectory() as log_dir, logger.scoped_configure(log_dir, format_strs=[]):
            t, cpu = time.perf_counter(), time.process_time()
            ppo2.learn(env=env, total_timesteps=steps, seed=seed, **kw)
            return steps / (time.perf_counter() - t), steps / (time.process_time() - cpu)
    finally:
        env.close()


def rollout_microseconds(repeats: int, vec_env: str) -> None:
    """CPU microseconds per env step of rollout collection alone (``Runner.run``, 256 steps x 8 envs, no
    update), plain and masked interleaved ``repeats`` times; prints the medians and the cost."""
    from algos.on_policy.runner import Runner
    from algos.ppo2.model import PPO2Model
    from algos.training import EpisodeStats

    runners, envs = {}, []
    for name in ("plain", "masked"):
        env = make_vec_env("CartPole-v1", "classic_control", 8, seed=0, vec_env_kind=vec_env, logger_dir="",
                           in_series=4 if vec_env == "subproc" else 1,
                           user_wrappers=(MASK_WRAPPER,) if name == "masked" else ())
        envs.append(env)
        policy = PPO2Model(env.observation_space, env.action_space, seed=0).policy
        runners[name] = Runner(env, policy, env.reset(), 256, 0.99, 0.95, np.random.default_rng(0), EpisodeStats())
        runners[name].run()  # warm-up
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, runner in runners.items():
            wall, cpu = time.perf_counter(), time.process_time()
            runner.run()
            times[name].append(((time.perf_counter() - wall) / (256 * 8) * 1e6,
                                (time.process_time() - cpu) / (256 * 8) * 1e6))
    for i, unit in enumerate(("wall-clock", "CPU (this process)")):
        plain, masked = (statistics.median(x[i] for x in times[k]) for k in ("plain", "masked"))
        print(f"rollout only ({vec_env}, {repeats} interleaved repeats of 256 x 8 steps): plain {plain:.1f}, masked "
              f"{masked:.1f} {unit} microseconds per env step: masking adds {masked - plain:.1f} us "
              f"({100 * (masked / plain - 1):.1f}%)")
    for env in envs:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--vec_env", choices=("dummy", "subproc"), default="dummy")
    parser.add_argument("--rollout", action="store_true", help="time rollout collection alone (CPU time per env step)")
    args = parser.parse_args()
    if args.rollout:
        rollout_microseconds(10 * args.repeats, args.vec_env)
        return
    results: dict[str, list[tuple[float, float]]] = {"plain": [], "masked": []}
    for r in range(args.repeats):
        for name in ("plain", "masked"):
            wall, cpu = steps_per_second(name == "masked", args.steps, args.vec_env, seed=r)
            results[name].append((wall, cpu))
            print(f"repeat {r} {name:6s} {wall:,.0f} steps/s, {cpu:,.0f} steps per CPU second", flush=True)
    for i, unit in enumerate(("steps/s", "steps per CPU second")):
        plain, masked = (statistics.median(x[i] for x in results[k]) for k in ("plain", "masked"))
        cost = 1.0 - masked / plain
        print(f"median plain {plain:,.0f} {unit}, masked {masked:,.0f} ({args.vec_env}, {args.steps} steps, "
              f"{args.repeats} repeats): masking costs {100 * cost:.1f}% "
              f"(target <= 10%: {'pass' if cost <= 0.10 else 'FAIL'})")


if __name__ == "__main__":
    main()

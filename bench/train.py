"""End-to-end training benchmark: random-action env rate vs learning rate, time to solve, evaluation.

    .venv/bin/python bench/train.py --alg {ppo2,deepq,ddpg,sac,td3} [--seeds 0 1 2 3 4] [--quick] [--profile]

Algorithms are entries of ``CONFIGS`` (alg -> function returning a BenchConfig); add deepq/ddpg there.
"""
from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as run.py does for users (see the note there)

import gymnasium as gym
import numpy as np

from algos.hyperparameters import shipped_entry
from common.vec_env import DummyVecEnv
from common.wrappers.monitor import Monitor

if TYPE_CHECKING:
    from algos.base import Model
    from common.vec_env.base import VecStepReturn


@dataclasses.dataclass
class BenchConfig:
    """What to run for one algorithm."""

    env_id: str
    num_envs: int
    total_timesteps: int
    learn: Callable  # learn(env=, total_timesteps=, seed=, **kwargs)
    kwargs: dict
    solved_at: float  # 100-episode mean return that counts as solved
    report: Callable[[list[dict]], str] | None = None  # extra line(s) printed after the seeds' summary


def ppo2_config() -> BenchConfig:
    """The issue's CartPole-v1 run: 8 envs, 100k steps, nsteps 32, 20 epochs of one 256-sample minibatch."""
    from algos.ppo2 import ppo2

    kwargs = {**shipped_entry("ppo2", env_id="CartPole-v1"), "network": "mlp", "log_interval": 10**9}
    return BenchConfig("CartPole-v1", 8, 100_000, ppo2.learn, kwargs, 475.0)


def ddpg_config() -> BenchConfig:
    """The issue's Pendulum-v1 run: 1 env, 20k steps, gamma 0.98, buffer 200k, learning_starts 10k,
    normal noise 0.1, lr 1e-3, 400x300 ReLU, one gradient step per env step (blocks of 100 env steps then
    100 fused updates), batch 256 (stable-baselines3's DDPG default; the issue gives none)."""
    from algos.ddpg import ddpg
    from bench.ddpg_floor import floor_report

    kwargs = {**shipped_entry("ddpg", "classic_control"), "log_interval": 10**9}
    return BenchConfig("Pendulum-v1", 1, 20_000, ddpg.learn, kwargs, -200.0,
                       report=lambda rows: floor_report(rows, "Pendulum-v1", kwargs, 20_000))


def offpolicy_config(alg: str) -> BenchConfig:
    """sac / td3: the issue's Pendulum-v1 run, 1 env, 20k steps, the shipped Pendulum-v1 entry
    (rl-baselines3-zoo's values; sac in fused blocks of 64, td3 in blocks of one 200-step episode)."""
    import importlib

    from bench.ddpg_floor import floor_report

    learn = importlib.import_module(f"algos.{alg}.{alg}").learn
    kwargs = {**shipped_entry(alg, "classic_control", "Pendulum-v1"), "log_interval": 10**9}
    return BenchConfig("Pendulum-v1", 1, 20_000, learn, kwargs, -200.0,
                       report=lambda rows: floor_report(rows, "Pendulum-v1", kwargs, 20_000, alg=alg))


def deepq_config() -> BenchConfig:
    """The issue's CartPole-v1 run: 1 env, 50k steps, lr linear from 2.3e-3 to 0, batch 64, buffer 100k, learning_starts 1000,
    target update every 10 env steps, 128 fused gradient steps every 256 env steps, epsilon 1 -> 0.04 over 16%,
    mlp of two ReLU layers of 256 under a dueling double-Q head of linear streams."""
    from algos.deepq import deepq

    kwargs = {**shipped_entry("deepq", "classic_control"), "print_freq": 0, "save_interval": 0}
    return BenchConfig("CartPole-v1", 1, 50_000, deepq.learn, kwargs, 475.0)


def a2c_config() -> BenchConfig:
    """The issue's CartPole-v1 run: 8 envs, 500k steps, the shipped entry (rl-zoo's A2C: lr 7e-4, no entropy
    bonus, separate value network; nsteps 5, RMSProp)."""
    from algos.a2c import a2c

    kwargs = {**shipped_entry("a2c", env_id="CartPole-v1"), "network": "mlp", "log_interval": 10**9}
    return BenchConfig("CartPole-v1", 8, 500_000, a2c.learn, kwargs, 475.0)


def trpo_config() -> BenchConfig:
    """The issue's CartPole-v1 run: 100k steps, the shipped entry (rl-zoo's TRPO: 1024 steps per update,
    max_kl 0.01, 20 value epochs); 1 env, as the runner's default."""
    from algos.trpo import trpo

    kwargs = {**shipped_entry("trpo", "classic_control", "CartPole-v1"), "network": "mlp", "log_interval": 10**9}
    return BenchConfig("CartPole-v1", 1, 100_000, trpo.learn, kwargs, 475.0)


CONFIGS: dict[str, Callable[[], BenchConfig]] = {"ppo2": ppo2_config, "ddpg": ddpg_config, "deepq": deepq_config,
                                                 "a2c": a2c_config, "trpo": trpo_config,
                                                 "sac": lambda: offpolicy_config("sac"),
                                                 "td3": lambda: offpolicy_config("td3")}


def make_venv(cfg: BenchConfig, seed: int) -> DummyVecEnv:
    venv = DummyVecEnv([lambda: Monitor(gym.make(cfg.env_id)) for _ in range(cfg.num_envs)])
    venv.seed(seed)
    return venv


def random_rate(cfg: BenchConfig, steps: int) -> float:
    """Env steps per second of the same vec env with random actions."""
    venv = make_venv(cfg, 0)
    venv.reset()
    space = venv.action_space
    acts = [np.array([space.sample() for _ in range(cfg.num_envs)]) for _ in range(64)]
    n = steps // cfg.num_envs
    t = time.perf_counter()
    for i in range(n):
        venv.step(acts[i % 64])
    dt = time.perf_counter() - t
    venv.close()
    return n * cfg.num_envs / dt


def evaluate(model: Model, cfg: BenchConfig, episodes: int, seed: int) -> float:
    """Mean deterministic return over ``episodes`` played one after the other on one fresh env.

    One env, so that every episode counts (with several envs the first episodes to finish would be the
    short ones, a bias against good policies on CartPole).
    """
    venv = DummyVecEnv([lambda: Monitor(gym.make(cfg.env_id))])
    venv.seed(seed)
    obs = venv.reset()
    state = model.initial_state(1)
    start = np.ones(1, bool)
    returns, running = [], 0.0
    while len(returns) < episodes:
        actions, state = model.predict(obs, state=state, episode_start=start, deterministic=True)
        obs, rew, start, _ = venv.step(actions)
        running += float(rew[0])
        if start[0]:
            returns.append(running)
            running = 0.0
    venv.close()
    return float(np.mean(returns))


def time_to_solve(monitor_rows: list[tuple[float, float, int]], threshold: float) -> tuple[float, int] | None:
    """(seconds, steps) when the 100-episode mean return first reaches ``threshold``."""
    rs = []
    for t, r, steps in monitor_rows:
        rs.append(r)
        if len(rs) >= 100 and np.mean(rs[-100:]) >= threshold:
            return t, steps
    return None


class EpisodeClock:
    """Wraps a vec env's step to record (elapsed seconds, return, total steps) of every finished episode.

    Every ``eval_every`` steps it also plays the model that learn() registered (``algos.training``)
    greedily for ``eval_episodes`` episodes, until that mean first reaches ``threshold``: ``greedy_solve``
    is then (seconds, steps). The time spent evaluating is taken off the clock of the run.
    """

    def __init__(self, venv, cfg: BenchConfig, seed: int, eval_every: int, eval_episodes: int = 5):
        self.venv, self.rows, self.steps = venv, [], 0
        self.t0 = time.perf_counter()
        self.eval_time = 0.0
        self.greedy_solve: tuple[float, int] | None = None
        inner = venv.step_wait
        next_eval = eval_every

        def step_wait() -> VecStepReturn:
            nonlocal next_eval
            obs, rew, dones, infos = inner()
            self.steps += venv.num_envs
            if dones.any():
                now = self.elapsed()
                for i in np.flatnonzero(dones):
                    ep = infos[i].get("episode")
                    if ep is not None:
                        self.rows.append((now, ep["r"], self.steps))
            if self.steps >= next_eval and self.greedy_solve is None:
                next_eval += eval_every
                self._greedy_check(cfg, seed, eval_episodes)
            return obs, rew, dones, infos

        venv.step_wait = step_wait

    def elapsed(self) -> float:
        """Seconds of the run so far, evaluations excluded."""
        return time.perf_counter() - self.t0 - self.eval_time

    def _greedy_check(self, cfg: BenchConfig, seed: int, episodes: int) -> None:
        from algos.training import registered_model

        model = registered_model()
        if model is None:
            return
        start = time.perf_counter()
        score = evaluate(model, cfg, episodes, seed + 2000)
        self.eval_time += time.perf_counter() - start
        if score >= cfg.solved_at:
            self.greedy_solve = (self.elapsed(), self.steps)


def run_seed(cfg: BenchConfig, seed: int, total: int, eval_episodes: int, profile: bool) -> dict:

    from common.logs import logger

    logger.configure(dir=None, format_strs=[])  # quiet: the table below is the output
    from algos import training

    training.register_model(None)
    venv = make_venv(cfg, seed)
    clock = EpisodeClock(venv, cfg, seed, eval_every=max(total // 20, 1))
    prof = cProfile.Profile() if profile else None
    clock.t0 = time.perf_counter()
    if prof:
        prof.enable()
    model = cfg.learn(env=venv, total_timesteps=total, seed=seed, **cfg.kwargs)
    if prof:
        prof.disable()
    dt = clock.elapsed()
    venv.close()
    solved = time_to_solve(clock.rows, cfg.solved_at)
    greedy = clock.greedy_solve
    out = {"seed": seed, "seconds": dt, "steps_per_s": clock.steps / dt,
           "solve_s": solved[0] if solved else None, "solve_steps": solved[1] if solved else None,
           "greedy_s": greedy[0] if greedy else None, "greedy_steps": greedy[1] if greedy else None,
           "eval": evaluate(model, cfg, eval_episodes, seed + 1000)}
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(18)
        out["profile"] = s.getvalue()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--alg", default="ppo2", choices=sorted(CONFIGS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--quick", action="store_true", help="one seed, 20k steps (a smoke run)")
    p.add_argument("--profile", action="store_true", help="cProfile the first seed's learn() and print the top")
    p.add_argument("--eval-episodes", type=int, default=20)
    args = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    cfg = CONFIGS[args.alg]()
    seeds = args.seeds[:1] if args.quick else args.seeds
    total = 20_000 if args.quick else cfg.total_timesteps
    rand = random_rate(cfg, 80_000)
    print(f"{args.alg} on {cfg.env_id} x{cfg.num_envs}, {total} steps; random-action DummyVecEnv: {rand:,.0f} steps/s")
    rows = []
    for i, seed in enumerate(seeds):
        r = run_seed(cfg, seed, total, args.eval_episodes, args.profile and i == 0)
        rows.append(r)
        solve = "never" if r["solve_s"] is None else f"{r['solve_s']:.1f}s / {r['solve_steps']} steps"
        greedy = "never" if r["greedy_s"] is None else f"{r['greedy_s']:.1f}s / {r['greedy_steps']} steps"
        print(f"seed {seed}: {r['seconds']:.1f}s  {r['steps_per_s']:,.0f} steps/s  time-to-solve {solve} "
              f"(greedy: {greedy})  eval mean {r['eval']:.1f}", flush=True)
        if "profile" in r:
            print(r["profile"])
    med_rate = statistics.median(r["steps_per_s"] for r in rows)
    solves = [r["solve_s"] for r in rows if r["solve_s"] is not None]
    greedy = [r["greedy_s"] for r in rows if r["greedy_s"] is not None]
    good = sum(r["eval"] >= cfg.solved_at for r in rows)
    print(f"median: {med_rate:,.0f} steps/s learning, ratio learn/random {med_rate / rand:.3f}; "
          f"median time-to-solve {statistics.median(solves):.1f}s ({len(solves)}/{len(rows)} solved)"
          if solves else f"median: {med_rate:,.0f} steps/s, ratio {med_rate / rand:.3f}; never solved")
    print(f"greedy time-to-solve (5-episode evaluation every {total // 20} steps, not timed): median "
          f"{statistics.median(greedy):.1f}s ({len(greedy)}/{len(rows)} reached)" if greedy else
          "greedy time-to-solve: never reached")
    print(f"deterministic eval >= {cfg.solved_at}: {good}/{len(rows)} seeds; evals "
          f"{[round(r['eval'], 1) for r in rows]}")
    if cfg.report is not None:
        print(cfg.report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

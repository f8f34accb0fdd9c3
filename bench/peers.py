"""Our runner against stable-baselines3 on the same settings, side by side: `bench/peers.py`.

    .venv/bin/python bench/peers.py [--only ppo2-cartpole deepq-cartpole ...] [--repeats 3]
                                    [--peer_python /work/peers-venv/bin/python] [--eval_episodes 10]

Each case is one training run of ours (``python -m run`` with this venv's python, the shipped
hyperparameter entry) and one of stable-baselines3 (a subprocess of ``--peer_python``, a venv made from
``bench/requirements-peers.txt``) with the rl-zoo / baselines settings written below, interleaved: repeat r
runs every case, ours and the peer's one after the other (order alternating with r), seed r for both. For
each it prints the median over repeats of

- wall: the whole command, process start to exit (ours: train, save, learning curve; the peer's: imports,
  env and model, ``learn``, save), so start-up counts;
- learn: the training loop alone (ours: the last ``time/time_elapsed`` of progress.csv, the peer's: the
  ``learn()`` call), and env steps/s = steps / learn;
- eval: the mean return of ``--eval_episodes`` deterministic episodes of the final model on a fresh env
  (not timed), ours through ``python -m run --load_path=... --eval_episodes=N``.

- cpu: the CPU seconds (user + system, all threads) of the whole command, evaluation left out: on a busy
  machine the wall times measure the machine, the CPU seconds still measure the work (``--threads 1`` on both
  sides keeps idle thread pools from spinning into them);

and the ratios peer / ours (above 1: we are faster). The load average before and after is printed with the
table: wall figures taken at a load above ~0.5 per core measure the machine, not the code.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PEER_PYTHON = os.environ.get("PEERS_PYTHON", "/work/peers-venv/bin/python")


@dataclass(frozen=True)
class Case:
    """One comparison: the same env, budget and (as far as each library allows) the same settings."""

    name: str
    env: str
    timesteps: int
    ours: list[str]  # extra flags of `python -m run` (the shipped entry gives the rest)
    peer: dict[str, Any]  # the peer's algorithm and settings (see PEER_SCRIPT)
    note: str = ""
    eval_episodes: int | None = None  # default: --eval_episodes


# rl-zoo's Pendulum-v1 settings for DDPG and TD3 (the same in both of its files)
ZOO_PENDULUM_DDPG_TD3 = {"gamma": 0.98, "buffer_size": 200_000, "learning_starts": 10_000, "gradient_steps": 1,
                         "train_freq": 1, "learning_rate": 1e-3, "policy_kwargs": {"net_arch": [400, 300]}}

CASES = [
    Case("ppo2-cartpole", "CartPole-v1", 100_000, ["--alg=ppo2", "--num_env=8"],
         {"algo": "PPO", "n_envs": 8, "kwargs": {"n_steps": 32, "batch_size": 256, "gae_lambda": 0.8, "gamma": 0.98,
                                                 "n_epochs": 20, "ent_coef": 0.0, "learning_rate": "lin_1e-3",
                                                 "clip_range": "lin_0.2"}},
         "rl-zoo settings on both sides (hyperparams/ppo2.toml [env.\"CartPole-v1\"])"),
    Case("deepq-cartpole", "CartPole-v1", 50_000, ["--alg=deepq"],
         {"algo": "DQN", "n_envs": 1, "kwargs": {"learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000,
                                                 "learning_starts": 1000, "gamma": 0.99, "target_update_interval": 10,
                                                 "train_freq": 256, "gradient_steps": 128,
                                                 "exploration_fraction": 0.16, "exploration_final_eps": 0.04,
                                                 "policy_kwargs": {"net_arch": [256, 256]}}},
         "rl-zoo settings; ours adds dueling + double Q (the shipped entry), SB3's DQN has neither"),
    Case("ddpg-pendulum", "Pendulum-v1", 20_000, ["--alg=ddpg"],
         {"algo": "DDPG", "n_envs": 1, "noise_std": 0.1, "kwargs": ZOO_PENDULUM_DDPG_TD3},
         "rl-zoo settings; ours trains 100 steps after every 100 env steps (one gradient step per env step "
         "on both sides), batch 256 on both"),
    Case("sac-pendulum", "Pendulum-v1", 20_000, ["--alg=sac"],
         {"algo": "SAC", "n_envs": 1, "kwargs": {"learning_rate": 1e-3}},
         "rl-zoo settings (SB3's defaults with lr 1e-3); ours trains 64 steps after every 64 env steps "
         "(one gradient step per env step on both sides)"),
    Case("td3-pendulum", "Pendulum-v1", 20_000, ["--alg=td3"],
         {"algo": "TD3", "n_envs": 1, "noise_std": 0.1, "kwargs": ZOO_PENDULUM_DDPG_TD3},
         "rl-zoo settings; ours trains 200 steps after every 200 env steps (one gradient step per env step "
         "on both sides)"),
    Case("a2c-cartpole", "CartPole-v1", 500_000, ["--alg=a2c", "--num_env=8"],
         {"algo": "A2C", "n_envs": 8, "kwargs": {"ent_coef": 0.0}},
         "rl-zoo settings (SB3's A2C defaults: RMSProp lr 7e-4, 5 steps, separate value network; no entropy)"),
    Case("trpo-cartpole", "CartPole-v1", 100_000, ["--alg=trpo", "--num_env=2"],
         {"algo": "TRPO", "contrib": True, "n_envs": 2,
          "kwargs": {"n_steps": 512, "batch_size": 512, "cg_damping": 1e-3, "gae_lambda": 0.98, "gamma": 0.99,
                     "learning_rate": 1e-3, "n_critic_updates": 20}},
         "rl-zoo settings on both sides (sb3-contrib's TRPO; hyperparams/trpo.toml [env.\"CartPole-v1\"])"),
    Case("ppo2-halfcheetah", "HalfCheetah-v5", 100_000, ["--alg=ppo2", "--num_env=1"],
         {"algo": "PPO", "n_envs": 1, "vec_normalize": True,
          "kwargs": {"n_steps": 2048, "batch_size": 64, "n_epochs": 10, "learning_rate": 3e-4, "gamma": 0.99,
                     "gae_lambda": 0.95, "clip_range": 0.2, "ent_coef": 0.0}},
         "baselines' MuJoCo settings on both sides, VecNormalize"),
    Case("ppo2-pong", "PongNoFrameskip-v4", 100_000, ["--alg=ppo2", "--num_env=8"],
         {"algo": "PPO", "n_envs": 8, "atari": True, "policy": "CnnPolicy",
          "kwargs": {"n_steps": 128, "n_epochs": 4, "batch_size": 256, "learning_rate": "lin_2.5e-4",
                     "clip_range": "lin_0.1", "vf_coef": 0.5, "ent_coef": 0.01}},
         "rl-zoo Atari settings, 4 stacked frames", eval_episodes=2),
]

# Runs in the peer's venv: argv[1] is a JSON job. Prints one JSON line with the learn time and evaluation.
PEER_SCRIPT = r"""
import json, sys, time
job = json.loads(sys.argv[1])
import numpy as np, torch
import stable_baselines3 as sb3
from stable_baselines3.common.env_util import make_vec_env, make_atari_env
from stable_baselines3.common.vec_env import VecFrameStack, VecNormalize
from stable_baselines3.common.evaluation import evaluate_policy
spec, seed = job["peer"], job["seed"]
if job.get("threads"):
    torch.set_num_threads(job["threads"])

def schedule(v):
    if isinstance(v, str) and v.startswith("lin_"):
        x = float(v[4:])
        return lambda progress: progress * x
    return v

def env(n, s):
    if spec.get("atari"):
        import ale_py, gymnasium
        gymnasium.register_envs(ale_py)
        return VecFrameStack(make_atari_env(job["env"], n_envs=n, seed=s), 4)
    return make_vec_env(job["env"], n_envs=n, seed=s)

venv = env(spec["n_envs"], seed)
if spec.get("vec_normalize"):
    venv = VecNormalize(venv, gamma=spec["kwargs"].get("gamma", 0.99))
kwargs = {k: schedule(v) for k, v in spec["kwargs"].items()}
if "noise_std" in spec:
    from stable_baselines3.common.noise import NormalActionNoise
    d = venv.action_space.shape[0]
    kwargs["action_noise"] = NormalActionNoise(np.zeros(d), spec["noise_std"] * np.ones(d))
if spec.get("contrib"):
    import sb3_contrib
    algos = sb3_contrib
else:
    algos = sb3
model = getattr(algos, spec["algo"])(spec.get("policy", "MlpPolicy"), venv, seed=seed, device="cpu", **kwargs)
t0 = time.perf_counter()
model.learn(total_timesteps=job["timesteps"])
learn = time.perf_counter() - t0
model.save(job["save"])
t1, c1 = time.perf_counter(), time.process_time()
eval_env = env(1, seed + 1000)
if spec.get("vec_normalize"):
    eval_env = VecNormalize(eval_env, training=False, norm_reward=False, gamma=venv.gamma)
    eval_env.obs_rms = venv.obs_rms
rewards, _ = evaluate_policy(model, eval_env, n_eval_episodes=job["eval_episodes"], deterministic=True,
                             return_episode_rewards=True)
print("PEER_RESULT " + json.dumps({"learn": learn, "eval_seconds": time.perf_counter() - t1,
      "eval_cpu": time.process_time() - c1,
      "eval": float(np.mean(rewards)),
      "threads": torch.get_num_threads(), "versions": [sb3.__version__, torch.__version__]}))
"""


@dataclass
class Result:
    wall: list[float] = field(default_factory=list)
    learn: list[float] = field(default_factory=list)
    eval: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(cmd: list[str], **kw: Any) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run ``cmd``; returns (wall seconds, CPU seconds of the process and its threads, the result)."""
    t0, c0 = time.perf_counter(), _children_cpu()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    return time.perf_counter() - t0, _children_cpu() - c0, out


def _check(out: subprocess.CompletedProcess, what: str) -> None:
    if out.returncode != 0:
        raise SystemExit(f"peers: {what} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")


def run_ours(case: Case, seed: int, folder: str, eval_episodes: int,
             threads: int | None = None) -> tuple[float, float, float, float]:
    """Train with `python -m run`; returns (wall, learn, eval, cpu)."""
    logs, model = os.path.join(folder, "ours"), os.path.join(folder, "ours.zip")
    cmd = [sys.executable, "-m", "run", f"--env={case.env}", f"--num_timesteps={case.timesteps}", f"--seed={seed}",
           f"--save_path={model}", f"--log_path={logs}", "--log_format=csv", *case.ours]
    env = {**os.environ, **({"RUNNER_TF_THREADS": str(threads)} if threads else {})}
    wall, cpu, out = _timed(cmd, cwd=ROOT, env=env)
    _check(out, " ".join(cmd[1:]))
    with open(os.path.join(logs, "progress.csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    learn = float(rows[-1]["time/time_elapsed"])
    ev = subprocess.run([sys.executable, "-m", "run", f"--load_path={model}", "--num_timesteps=0",
                         f"--eval_episodes={eval_episodes}", f"--seed={seed + 1000}"],
                        cwd=ROOT, capture_output=True, text=True, check=False)
    _check(ev, "our evaluation")
    found = re.search(r"return (\S+) \+-", ev.stdout)
    return wall, learn, float(found.group(1)) if found else float("nan"), cpu


def run_peer(case: Case, seed: int, folder: str, eval_episodes: int, python: str,
             threads: int | None = None) -> tuple[float, float, float, dict]:
    """Train with stable-baselines3 in ``python``; returns (wall to the end of save, learn, eval, cpu, info)."""
    job = {"peer": case.peer, "env": case.env, "timesteps": case.timesteps, "seed": seed,
           "save": os.path.join(folder, "peer.zip"), "eval_episodes": eval_episodes, "threads": threads}
    total, cpu, out = _timed([python, "-c", PEER_SCRIPT, json.dumps(job)], cwd=folder)
    _check(out, f"stable-baselines3 {case.name}")
    line = next(x for x in out.stdout.splitlines() if x.startswith("PEER_RESULT "))
    info = json.loads(line.split(" ", 1)[1])
    # the whole command up to the saved model: the process's time, measured from outside, less the evaluation
    return total - info["eval_seconds"], info["learn"], info["eval"], cpu - info["eval_cpu"], info


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _ratio(peer: float, ours: float) -> str:
    return f"{peer / ours:.2f}x" if ours > 0 and math.isfinite(peer / ours) else "-"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", choices=[c.name for c in CASES], default=None)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--eval_episodes", type=int, default=10)
    p.add_argument("--peer_python", default=DEFAULT_PEER_PYTHON)
    p.add_argument("--threads", type=int, default=None,
                   help="threads of both sides (torch's, and ours through RUNNER_TF_THREADS); default: each "
                   "library's own choice, what its users get")
    p.add_argument("--peer_threads", type=int, default=None, help="torch threads of the peer alone")
    p.add_argument("--timesteps", type=int, default=None, help="override every case's budget (quick checks only)")
    args = p.parse_args(argv)
    if not os.path.exists(args.peer_python):
        raise SystemExit(f"peers: no {args.peer_python}; make a venv from bench/requirements-peers.txt and pass "
                         "--peer_python=VENV/bin/python")
    cases = [c if args.timesteps is None else dataclasses.replace(c, timesteps=args.timesteps)
             for c in CASES if args.only is None or c.name in args.only]
    ours = {c.name: Result() for c in cases}
    peer = {c.name: Result() for c in cases}
    load_before, started, versions = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), None
    for r in range(args.repeats):
        for case in cases:
            episodes = case.eval_episodes or args.eval_episodes
            with tempfile.TemporaryDirectory(prefix=f"peers-{case.name}-") as folder:
                order = ("ours", "peer") if r % 2 == 0 else ("peer", "ours")
                for who in order:
                    if who == "ours":
                        wall, learn, ev, cpu = run_ours(case, r, folder, episodes, args.threads)
                        res = ours[case.name]
                    else:
                        wall, learn, ev, cpu, info = run_peer(case, r, folder, episodes, args.peer_python,
                                                              args.peer_threads or args.threads)
                        res, versions = peer[case.name], (info["versions"], info["threads"])
                    res.wall.append(wall), res.learn.append(learn), res.eval.append(ev), res.cpu.append(cpu)
                    print(f"# repeat {r} {case.name} {who}: wall {wall:.1f} s, learn {learn:.1f} s, cpu {cpu:.1f} s, "
                          f"eval {ev:.1f}, "
                          f"load {os.getloadavg()[0]:.2f}", flush=True)
    load_after = os.getloadavg()
    print(f"\n{started}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average before "
          f"{load_before[0]:.2f}/{load_before[1]:.2f}, after {load_after[0]:.2f}/{load_after[1]:.2f}; "
          f"stable-baselines3 {versions[0][0] if versions else '?'}, torch {versions[0][1] if versions else '?'} "
          f"({versions[1] if versions else '?'} threads); median of {args.repeats} interleaved repeat(s), seeds "
          f"0..{args.repeats - 1}\n")
    print("| case | steps | wall ours | wall SB3 | wall ratio | learn ours | learn SB3 | learn ratio "
          "| steps/s ours | steps/s SB3 | cpu ours | cpu SB3 | cpu ratio | eval ours | eval SB3 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for case in cases:
        o, s = ours[case.name], peer[case.name]
        ow, sw, ol, sl = _median(o.wall), _median(s.wall), _median(o.learn), _median(s.learn)
        oc, sc = _median(o.cpu), _median(s.cpu)
        print(f"| {case.name} | {case.timesteps:,} | {ow:.1f} s | {sw:.1f} s | {_ratio(sw, ow)} | {ol:.1f} s | "
              f"{sl:.1f} s | {_ratio(sl, ol)} | {case.timesteps / ol:,.0f} | {case.timesteps / sl:,.0f} | "
              f"{oc:.1f} s | {sc:.1f} s | {_ratio(sc, oc)} | "
              f"{_median(o.eval):.1f} | {_median(s.eval):.1f} |")
    print("\nratios: SB3 / ours (above 1: ours faster). Settings:")
    for case in cases:
        print(f"- {case.name}: {case.env}, {case.timesteps:,} steps; {case.note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Our runner against stable-baselines3 and CleanRL on the same settings, side by side: `bench/peers.py`.

    .venv/bin/python bench/peers.py [--only ppo2-cartpole deepq-cartpole ...] [--repeats 3]
                                    [--peers sb3 cleanrl] [--eval_episodes 10]
                                    [--peer_python /work/peers-venv/bin/python]
                                    [--cleanrl_python /work/cleanrl-venv/bin/python] [--cleanrl_dir /work/cleanrl]

Each case is one training run of ours (``python -m run`` with this venv's python, the shipped
hyperparameter entry), one of stable-baselines3 (a subprocess of ``--peer_python``, a venv made from
``bench/requirements-peers.txt``) with the rl-zoo / baselines settings written below, and, where CleanRL has a
single-file script for the case, one of that script (run as it is from a checkout of CleanRL at
``--cleanrl_dir`` by ``--cleanrl_python``, both made as ``bench/requirements-cleanrl.txt`` says) with flags as
close to the same settings as the script allows (each case's note says where they differ). The runs are
interleaved: repeat r runs every case, each side one after the other (the order rotating with r), seed r for
all. For each it prints the median over repeats of

- wall: the whole command, process start to exit (ours: train, save, learning curve; SB3: imports, env and
  model, ``learn``, save; CleanRL: the script up to its ``model saved to`` line, or to its exit where it saves
  nothing), so start-up counts;
- learn: the training loop alone (ours: the last ``time/time_elapsed`` of progress.csv, SB3: the ``learn()``
  call, CleanRL: steps / the script's last printed ``SPS``), and env steps/s = steps / learn;
- eval: the mean return of ``--eval_episodes`` deterministic episodes of the final model on a fresh env
  (not timed), ours through ``python -m run --load_path=... --eval_episodes=N``; for CleanRL scripts that
  cannot save a model (ppo.py, sac_continuous_action.py) the mean of the last 10 training episodes the
  script printed, marked "(train)";
- cpu: the CPU seconds (user + system, all threads) of the whole command, evaluation left out: on a busy
  machine the wall times measure the machine, the CPU seconds still measure the work (``--threads 1`` on all
  sides keeps idle thread pools from spinning into them);

and the ratios peer / ours (above 1: we are faster). The load average before and after is printed with the
table: wall figures taken at a load above ~0.5 per core measure the machine, not the code.
"""

from __future__ import annotations

import abc
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
from dataclasses import dataclass
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from common.errors import UserError

DEFAULT_PEER_PYTHON = os.environ.get("PEERS_PYTHON", "/work/peers-venv/bin/python")
DEFAULT_CLEANRL_PYTHON = os.environ.get("CLEANRL_PYTHON", "/work/cleanrl-venv/bin/python")
DEFAULT_CLEANRL_DIR = os.environ.get("CLEANRL_DIR", "/work/cleanrl")
CLEANRL_COMMIT = "fe8d8a03c41a7ef5b523e2e354bd01c363e786bb"  # the checkout bench/requirements-cleanrl.txt pins


class PeerMissing(UserError):
    """A peer asked for is not installed where the options say; the message says how to make it."""


@dataclass(frozen=True)
class CleanRL:
    """How one of CleanRL's single-file scripts trains a case: the script, its flags (tyro's names without
    the leading ``--``; True/False give ``--name``/``--no-name``) and how its saved model acts."""

    script: str  # path inside the CleanRL checkout
    flags: dict[str, Any]
    model: str | None = None  # "q": argmax of its QNetwork, "actor": its Actor's output; None: saves no model
    note: str = ""


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
    cleanrl: CleanRL | None = None  # None: no CleanRL script fits


# rl-zoo's Pendulum-v1 settings for DDPG and TD3 (the same in both of its files)
ZOO_PENDULUM_DDPG_TD3 = {"gamma": 0.98, "buffer_size": 200_000, "learning_starts": 10_000, "gradient_steps": 1,
                         "train_freq": 1, "learning_rate": 1e-3, "policy_kwargs": {"net_arch": [400, 300]}}
# the same in CleanRL's flags (its DDPG and TD3 scripts add noise scaled by the action range, as SB3 does)
CLEANRL_PENDULUM_DDPG_TD3 = {"gamma": 0.98, "buffer-size": 200_000, "learning-starts": 10_000, "learning-rate": 1e-3,
                             "batch-size": 256, "tau": 0.005, "exploration-noise": 0.1}

CASES = [
    Case("ppo2-cartpole", "CartPole-v1", 100_000, ["--alg=ppo2", "--num_env=8"],
         {"algo": "PPO", "n_envs": 8, "kwargs": {"n_steps": 32, "batch_size": 256, "gae_lambda": 0.8, "gamma": 0.98,
                                                 "n_epochs": 20, "ent_coef": 0.0, "learning_rate": "lin_1e-3",
                                                 "clip_range": "lin_0.2"}},
         "rl-zoo settings on both sides (hyperparams/ppo2.toml [env.\"CartPole-v1\"])",
         cleanrl=CleanRL("cleanrl/ppo.py", {"num-envs": 8, "num-steps": 32, "num-minibatches": 1, "update-epochs": 20,
                                            "gae-lambda": 0.8, "gamma": 0.98, "ent-coef": 0.0, "learning-rate": 1e-3,
                                            "anneal-lr": True, "clip-coef": 0.2, "clip-vloss": False},
                         note="clip range 0.2 constant (the script has no schedule for it); 99,840 steps "
                         "(whole 256-step rollouts); no model saved")),
    # Ours with the zoo's plain DQN (the shipped entry adds a dueling head, double Q, a decaying lr and a policy
    # averaged over 5,000 gradient steps: a fifth more arithmetic per gradient step than SB3's DQN does).
    Case("deepq-cartpole", "CartPole-v1", 50_000,
         ["--alg=deepq", "--dueling=False", "--double_q=False", "--lr=2.3e-3", "--policy_average_steps=0"],
         {"algo": "DQN", "n_envs": 1, "kwargs": {"learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000,
                                                 "learning_starts": 1000, "gamma": 0.99, "target_update_interval": 10,
                                                 "train_freq": 256, "gradient_steps": 128,
                                                 "exploration_fraction": 0.16, "exploration_final_eps": 0.04,
                                                 "policy_kwargs": {"net_arch": [256, 256]}}},
         "rl-zoo settings on both sides (ours without the shipped entry's dueling head, double Q, lr decay and "
         "policy averaging)",
         cleanrl=CleanRL("cleanrl/dqn.py", {"learning-rate": 2.3e-3, "batch-size": 64, "buffer-size": 100_000,
                                            "learning-starts": 1000, "gamma": 0.99, "target-network-frequency": 10,
                                            "train-frequency": 2, "exploration-fraction": 0.16, "end-e": 0.04},
                         model="q",
                         note="one gradient step every 2 env steps (the zoo: 128 every 256, the same count); the "
                         "script's fixed 120x84 Q-network (the zoo: 256x256); epsilon-greedy from step 0")),
    Case("ddpg-pendulum", "Pendulum-v1", 20_000, ["--alg=ddpg"],
         {"algo": "DDPG", "n_envs": 1, "noise_std": 0.1, "kwargs": ZOO_PENDULUM_DDPG_TD3},
         "rl-zoo settings; ours trains 100 steps after every 100 env steps (one gradient step per env step "
         "on both sides), batch 256 on both",
         cleanrl=CleanRL("cleanrl/ddpg_continuous_action.py", {**CLEANRL_PENDULUM_DDPG_TD3, "policy-frequency": 1},
                         model="actor", note="the script's fixed 256x256 networks (the zoo: 400x300)")),
    Case("sac-pendulum", "Pendulum-v1", 20_000, ["--alg=sac"],
         {"algo": "SAC", "n_envs": 1, "kwargs": {"learning_rate": 1e-3}},
         "rl-zoo settings (SB3's defaults with lr 1e-3); ours trains 64 steps after every 64 env steps "
         "(one gradient step per env step on both sides)",
         cleanrl=CleanRL("cleanrl/sac_continuous_action.py",
                         {"policy-lr": 1e-3, "q-lr": 1e-3, "learning-starts": 100, "batch-size": 256, "gamma": 0.99,
                          "tau": 0.005, "policy-frequency": 1, "target-network-frequency": 1, "autotune": True},
                         note="SB3's settings; no model saved")),
    # the shipped entry starts training at 5k env steps; the zoo (and the SB3 side) at 10k
    Case("td3-pendulum", "Pendulum-v1", 20_000, ["--alg=td3", "--learning_starts=10000"],
         {"algo": "TD3", "n_envs": 1, "noise_std": 0.1, "kwargs": ZOO_PENDULUM_DDPG_TD3},
         "rl-zoo settings (random actions for the first 10k steps on both sides); ours trains 200 steps after "
         "every 200 env steps (one gradient step per env step on both sides)",
         cleanrl=CleanRL("cleanrl/td3_continuous_action.py",
                         {**CLEANRL_PENDULUM_DDPG_TD3, "policy-frequency": 2, "policy-noise": 0.2, "noise-clip": 0.5},
                         model="actor", note="the script's fixed 256x256 networks (the zoo: 400x300)")),
    Case("a2c-cartpole", "CartPole-v1", 500_000, ["--alg=a2c", "--num_env=8"],
         {"algo": "A2C", "n_envs": 8, "kwargs": {"ent_coef": 0.0}},
         "rl-zoo settings (SB3's A2C defaults: RMSProp lr 7e-4, 5 steps, separate value network; no entropy)"),
    Case("trpo-cartpole", "CartPole-v1", 100_000, ["--alg=trpo", "--num_env=2"],
         {"algo": "TRPO", "contrib": True, "n_envs": 2,
          "kwargs": {"n_steps": 512, "batch_size": 512, "cg_damping": 1e-3, "gae_lambda": 0.98, "gamma": 0.99,
                     "learning_rate": 1e-3, "n_critic_updates": 20}},
         "rl-zoo settings on both sides (sb3-contrib's TRPO; hyperparams/trpo.toml [env.\"CartPole-v1\"])"),
    # The shipped [env."HalfCheetah-v5"] entry (rl-zoo's tuned values, 256x256 relu) is overridden key by key.
    Case("ppo2-halfcheetah", "HalfCheetah-v5", 100_000,
         ["--alg=ppo2", "--num_env=1", "--nsteps=2048", "--nminibatches=32", "--noptepochs=10", "--lr=3e-4",
          "--gamma=0.99", "--lam=0.95", "--cliprange=0.2", "--ent_coef=0.0", "--vf_coef=0.5", "--max_grad_norm=0.5",
          "--log_std_init=0.0", "--value_network=copy", "--num_layers=2", "--num_hidden=64", "--activation=tanh"],
         {"algo": "PPO", "n_envs": 1, "vec_normalize": True,
          "kwargs": {"n_steps": 2048, "batch_size": 64, "n_epochs": 10, "learning_rate": 3e-4, "gamma": 0.99,
                     "gae_lambda": 0.95, "clip_range": 0.2, "ent_coef": 0.0}},
         "baselines' MuJoCo settings on both sides, VecNormalize"),
    # the zoo's schedules over the run (the shipped Atari entry decays them to 3/4 only)
    Case("ppo2-pong", "PongNoFrameskip-v4", 100_000,
         ["--alg=ppo2", "--num_env=8", "--lr=lin_2.5e-4", "--cliprange=lin_0.1"],
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


# Runs in the CleanRL venv: argv[1] is a JSON job naming the script, its saved model and how the model acts.
# Imports the script as a module (its training sits under `if __name__ == "__main__"`) for its networks and
# make_env, and prints one JSON line with the mean return of deterministic episodes.
CLEANRL_EVAL_SCRIPT = r"""
import importlib.util, json, sys
import gymnasium as gym, numpy as np, torch
job = json.loads(sys.argv[1])
spec = importlib.util.spec_from_file_location("cleanrl_script", job["script"])
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)
envs = gym.vector.SyncVectorEnv([script.make_env(job["env"], job["seed"], 0, False, "eval")])
state = torch.load(job["model"], map_location="cpu")
if job["kind"] == "q":
    net = script.QNetwork(envs)
    net.load_state_dict(state)
    act = lambda obs: net(torch.Tensor(obs)).argmax(dim=1).numpy()
else:
    net = script.Actor(envs)
    net.load_state_dict(state[0])
    act = lambda obs: net(torch.Tensor(obs)).numpy()
obs, _ = envs.reset(seed=job["seed"])
returns, total = [], 0.0
with torch.no_grad():
    while len(returns) < job["episodes"]:
        obs, reward, terminated, truncated, _ = envs.step(act(obs))
        total += float(reward[0])
        if terminated[0] or truncated[0]:
            returns.append(total)
            total = 0.0
print("CLEANRL_EVAL " + json.dumps({"eval": float(np.mean(returns))}))
"""


@dataclass(frozen=True)
class Run:
    """One training run of one side: wall and CPU seconds of the command, the training loop's seconds, and
    the final return (``eval_kind`` "train" where it is a training-episode mean, not an evaluation)."""

    wall: float
    learn: float
    eval: float
    cpu: float
    eval_kind: str = ""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(cmd: list[str], **kw: Any) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run ``cmd``; returns (wall seconds, CPU seconds of the process and its threads, the result)."""
    t0, c0 = time.perf_counter(), _children_cpu()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    return time.perf_counter() - t0, _children_cpu() - c0, out


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) a running process has used so far, from /proc."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed_until(cmd: list[str], marker: str | None, cwd: str, env: dict[str, str]) -> tuple[float, float, str, int]:
    """Run ``cmd``, reading its stdout line by line; at the first line that starts with ``marker`` take the
    time and CPU and stop the process (whatever it would do next is not timed), else time it to its exit.
    Returns (wall, cpu, stdout up to there, exit status or 0 when stopped at the marker)."""
    t0, c0 = time.perf_counter(), _children_cpu()
    lines: list[str] = []
    with tempfile.TemporaryFile("w+") as err, subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                                               stderr=err, text=True) as proc:
        for line in proc.stdout:
            lines.append(line)
            if marker is not None and line.startswith(marker):
                wall, cpu = time.perf_counter() - t0, _process_cpu(proc.pid)
                proc.terminate()
                proc.wait()
                return wall, cpu, "".join(lines), 0
        status = proc.wait()
        err.seek(0)
        stderr = err.read()
    if status != 0:
        raise SystemExit(f"peers: {' '.join(cmd)} failed (exit {status}):\n{stderr[-3000:]}")
    return time.perf_counter() - t0, _children_cpu() - c0, "".join(lines), status


def _check(out: subprocess.CompletedProcess, what: str) -> None:
    if out.returncode != 0:
        raise SystemExit(f"peers: {what} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")


def _thread_env(threads: int | None) -> dict[str, str]:
    """The environment of a torch process limited to ``threads`` threads (unchanged when None)."""
    return {**os.environ, **({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)} if threads else {})}


class Side(abc.ABC):
    """One side of the comparison: trains a case in a subprocess and says what it ran on."""

    name = ""

    def applies(self, case: Case) -> bool:
        """Whether this side has a way to train ``case``."""
        return True

    def check(self) -> None:
        """Raise PeerMissing (one line: how to install it) when this side cannot run here."""

    @abc.abstractmethod
    def train(self, case: Case, seed: int, folder: str, eval_episodes: int, threads: int | None) -> Run:
        """Train ``case`` with ``seed`` in ``folder`` and evaluate the final model."""

    def describe(self) -> str:
        """Library versions and threads, for the table's header ('' when nothing to say)."""
        return ""


class Ours(Side):
    """``python -m run`` with this venv's python and the shipped hyperparameter entry."""

    name = "ours"

    def train(self, case: Case, seed: int, folder: str, eval_episodes: int, threads: int | None) -> Run:
        logs, model = os.path.join(folder, "ours"), os.path.join(folder, "ours.zip")
        cmd = [sys.executable, "-m", "run", f"--env={case.env}", f"--num_timesteps={case.timesteps}",
               f"--seed={seed}", f"--save_path={model}", f"--log_path={logs}", "--log_format=csv", *case.ours]
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
        return Run(wall, learn, float(found.group(1)) if found else float("nan"), cpu)


class StableBaselines3(Side):
    """stable-baselines3 (and sb3-contrib) in the venv of ``python``, driven by PEER_SCRIPT."""

    name = "SB3"

    def __init__(self, python: str) -> None:
        self.python, self.versions = python, ""

    def check(self) -> None:
        if not os.path.exists(self.python):
            raise PeerMissing(f"no {self.python}; make a venv from bench/requirements-peers.txt and pass "
                              "--peer_python=VENV/bin/python, or leave stable-baselines3 out with --peers cleanrl")

    def train(self, case: Case, seed: int, folder: str, eval_episodes: int, threads: int | None) -> Run:
        job = {"peer": case.peer, "env": case.env, "timesteps": case.timesteps, "seed": seed,
               "save": os.path.join(folder, "peer.zip"), "eval_episodes": eval_episodes, "threads": threads}
        total, cpu, out = _timed([self.python, "-c", PEER_SCRIPT, json.dumps(job)], cwd=folder)
        _check(out, f"stable-baselines3 {case.name}")
        line = next(x for x in out.stdout.splitlines() if x.startswith("PEER_RESULT "))
        info = json.loads(line.split(" ", 1)[1])
        (sb3, torch), n = info["versions"], info["threads"]
        self.versions = f"stable-baselines3 {sb3}, torch {torch} ({n} threads)"
        # the whole command up to the saved model: the process's time, measured from outside, less the evaluation
        return Run(total - info["eval_seconds"], info["learn"], info["eval"], cpu - info["eval_cpu"])

    def describe(self) -> str:
        return self.versions


def cleanrl_argv(case: Case, seed: int, python: str, checkout: str) -> list[str]:
    """The command line that trains ``case`` with CleanRL's script: the case's env, budget and seed, on the
    CPU, saving the model where the script can and the case's flags."""
    spec = case.cleanrl
    if spec is None:
        raise ValueError(f"no CleanRL script for {case.name}")
    flags = {"env-id": case.env, "total-timesteps": case.timesteps, "seed": seed, "cuda": False,
             **({"save-model": True} if spec.model else {}), **spec.flags}
    argv = [python, "-u", os.path.join(checkout, spec.script)]
    for name, value in flags.items():
        argv.append((f"--{name}" if value else f"--no-{name}") if isinstance(value, bool) else f"--{name}={value}")
    return argv


def _last_training_mean(stdout: str, n: int = 10) -> float:
    """The mean of the last ``n`` training episodic returns a CleanRL script printed (nan when none)."""
    returns = [float(x) for x in re.findall(r"episodic_return=\[?([-+0-9.eE]+)", stdout)][-n:]
    return statistics.mean(returns) if returns else float("nan")


class CleanRLScripts(Side):
    """CleanRL's single-file scripts, run as they are from the checkout ``checkout`` by ``python``."""

    name = "CleanRL"

    def __init__(self, python: str, checkout: str) -> None:
        self.python, self.checkout, self.threads = python, checkout, None

    def applies(self, case: Case) -> bool:
        return case.cleanrl is not None

    def check(self) -> None:
        if not os.path.exists(self.python):
            missing = f"{self.python} (CleanRL's venv)"
        elif not os.path.isdir(os.path.join(self.checkout, "cleanrl_utils")):
            missing = f"{self.checkout}/cleanrl_utils (a checkout of CleanRL)"
        else:
            return
        raise PeerMissing(f"no {missing}; make the venv and the checkout as bench/requirements-cleanrl.txt says and "
                          "pass --cleanrl_python/--cleanrl_dir, or leave CleanRL out with --peers sb3")

    def _env(self, threads: int | None) -> dict[str, str]:
        env = _thread_env(threads)
        return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [self.checkout, env.get("PYTHONPATH")]))}

    def train(self, case: Case, seed: int, folder: str, eval_episodes: int, threads: int | None) -> Run:
        spec, self.threads = case.cleanrl, threads
        assert spec is not None
        work = os.path.join(folder, "cleanrl")
        os.makedirs(work, exist_ok=True)
        marker = "model saved to " if spec.model else None
        wall, cpu, stdout, _ = _timed_until(cleanrl_argv(case, seed, self.python, self.checkout), marker,
                                            cwd=work, env=self._env(threads))
        sps = re.findall(r"^SPS: (\d+)", stdout, re.MULTILINE)
        learn = case.timesteps / int(sps[-1]) if sps else float("nan")
        if not spec.model:
            return Run(wall, learn, _last_training_mean(stdout), cpu, eval_kind="train")
        saved = os.path.join(work, stdout.rsplit(marker, 1)[1].splitlines()[0].strip())
        job = {"script": os.path.join(self.checkout, spec.script), "env": case.env, "seed": seed + 1000,
               "model": saved, "kind": spec.model, "episodes": eval_episodes}
        ev = subprocess.run([self.python, "-c", CLEANRL_EVAL_SCRIPT, json.dumps(job)], cwd=work,
                            env=self._env(threads), capture_output=True, text=True, check=False)
        _check(ev, f"CleanRL evaluation of {case.name}")
        line = next(x for x in ev.stdout.splitlines() if x.startswith("CLEANRL_EVAL "))
        return Run(wall, learn, json.loads(line.split(" ", 1)[1])["eval"], cpu)

    def describe(self) -> str:
        head = subprocess.run(["git", "-C", self.checkout, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=False).stdout.strip() or "?"
        query = "import gymnasium, torch; print(torch.__version__, torch.get_num_threads(), gymnasium.__version__)"
        out = subprocess.run([self.python, "-c", query], env=self._env(self.threads), capture_output=True, text=True,
                             check=False).stdout
        torch, threads, gym = (out.split() + ["?"] * 3)[:3]
        pinned = "" if head == CLEANRL_COMMIT else f", not the pinned {CLEANRL_COMMIT[:8]}"
        return f"CleanRL {head[:8]}{pinned}, torch {torch} ({threads} threads), gymnasium {gym}"


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _ratio(peer: float, ours: float) -> str:
    return f"{peer / ours:.2f}x" if ours > 0 and math.isfinite(peer / ours) else "-"


def _rotated(sides: list[Side], r: int) -> list[Side]:
    """The sides in the order of repeat ``r``: each repeat starts one later, so no side always runs first."""
    k = r % len(sides)
    return sides[k:] + sides[:k]


def table(cases: list[Case], sides: list[Side], runs: dict[tuple[str, str], list[Run]]) -> list[str]:
    """The markdown table: one row per case and side, medians over repeats, ratios side / ours."""
    rows = ["| case | side | steps | wall | learn | steps/s | cpu | eval | wall ratio | learn ratio | cpu ratio |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for case in cases:
        ours = runs[(case.name, sides[0].name)]
        ow, ol, oc = (_median([getattr(x, k) for x in ours]) for k in ("wall", "learn", "cpu"))
        for side in sides:
            mine = runs.get((case.name, side.name))
            if not mine:
                continue
            w, lr, c, ev = (_median([getattr(x, k) for x in mine]) for k in ("wall", "learn", "cpu", "eval"))
            kind = f" ({mine[0].eval_kind})" if mine[0].eval_kind else ""
            ratios = ["-"] * 3 if side is sides[0] else [_ratio(w, ow), _ratio(lr, ol), _ratio(c, oc)]
            rows.append(f"| {case.name} | {side.name} | {case.timesteps:,} | {w:.1f} s | {lr:.1f} s | "
                        f"{case.timesteps / lr:,.0f} | {c:.1f} s | {ev:.1f}{kind} | {' | '.join(ratios)} |")
    return rows


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", choices=[c.name for c in CASES], default=None)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--eval_episodes", type=int, default=10)
    p.add_argument("--peers", nargs="+", choices=["sb3", "cleanrl"], default=["sb3", "cleanrl"],
                   help="the peers to run beside ours (CleanRL only on the cases it has a script for)")
    p.add_argument("--peer_python", default=DEFAULT_PEER_PYTHON, help="python of the stable-baselines3 venv")
    p.add_argument("--cleanrl_python", default=DEFAULT_CLEANRL_PYTHON, help="python of the CleanRL venv")
    p.add_argument("--cleanrl_dir", default=DEFAULT_CLEANRL_DIR, help="a checkout of CleanRL's repository")
    p.add_argument("--threads", type=int, default=None,
                   help="threads of all sides (torch's, and ours through RUNNER_TF_THREADS); default: each "
                   "library's own choice, what its users get")
    p.add_argument("--peer_threads", type=int, default=None, help="torch threads of the peers alone")
    p.add_argument("--timesteps", type=int, default=None, help="override every case's budget (quick checks only)")
    return p


def sides_from(args: argparse.Namespace) -> list[Side]:
    """Ours first, then the peers asked for; raises PeerMissing for a peer that is not installed."""
    peers: dict[str, Side] = {"sb3": StableBaselines3(args.peer_python),
                              "cleanrl": CleanRLScripts(args.cleanrl_python, args.cleanrl_dir)}
    chosen = [peers[name] for name in args.peers]
    for side in chosen:
        side.check()
    return [Ours(), *chosen]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        sides = sides_from(args)
    except UserError as e:
        print(f"peers: error: {e}", file=sys.stderr)
        return 2
    cases = [c if args.timesteps is None else dataclasses.replace(c, timesteps=args.timesteps)
             for c in CASES if args.only is None or c.name in args.only]
    runs: dict[tuple[str, str], list[Run]] = {}
    load_before, started = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for r in range(args.repeats):
        for case in cases:
            episodes = case.eval_episodes or args.eval_episodes
            with tempfile.TemporaryDirectory(prefix=f"peers-{case.name}-") as folder:
                for side in _rotated([s for s in sides if s.applies(case)], r):
                    threads = args.threads if isinstance(side, Ours) else args.peer_threads or args.threads
                    run = side.train(case, r, folder, episodes, threads)
                    runs.setdefault((case.name, side.name), []).append(run)
                    print(f"# repeat {r} {case.name} {side.name}: wall {run.wall:.1f} s, learn {run.learn:.1f} s, "
                          f"cpu {run.cpu:.1f} s, eval {run.eval:.1f}{' (train)' if run.eval_kind else ''}, "
                          f"load {os.getloadavg()[0]:.2f}", flush=True)
    load_after = os.getloadavg()
    described = "; ".join(filter(None, (side.describe() for side in sides)))
    print(f"\n{started}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average before "
          f"{load_before[0]:.2f}/{load_before[1]:.2f}, after {load_after[0]:.2f}/{load_after[1]:.2f}; {described}; "
          f"median of {args.repeats} interleaved repeat(s), seeds 0..{args.repeats - 1}\n")
    print("\n".join(table(cases, sides, runs)))
    print("\nratios: peer / ours (above 1: ours faster); eval (train): the mean of the last 10 training episodes "
          "(the script saves no model). Settings:")
    for case in cases:
        print(f"- {case.name}: {case.env}, {case.timesteps:,} steps; {case.note}"
              + (f"; CleanRL {os.path.basename(case.cleanrl.script)}: {case.cleanrl.note}" if case.cleanrl else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

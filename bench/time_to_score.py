"""Time to a published score, side by side, each library on its own shipped settings: `bench/time_to_score.py`.

    .venv/bin/python bench/time_to_score.py CASE [CASE ...] --seeds 0 1 2 [--peers sb3 cleanrl]
        [--eval_episodes 10] [--budget N] [--threads N] [--keep FOLDER]
        [--peer_python /work/peers-venv/bin/python] [--cleanrl_python /work/cleanrl-venv/bin/python]
        [--cleanrl_dir /work/cleanrl]

CASE is a name of CASES below (or ``all``). Each case trains, interleaved, seed by seed:

- ours: ``python -m run --alg=ALG --env=ENV`` with the shipped hyperparameter entry and no hyperparameter
  flags; the benchmark adds only the seed, the budget, the log and save paths and ``--save_interval=EVERY
  --keep_checkpoints=0`` (the runner's own model checkpoints);
- stable-baselines3 + rl-zoo: the zoo's entry for the env and algorithm (bench/zoo_hyperparams.toml, the
  values of its hyperparams/*.yml) built as the zoo's train.py builds it (bench/tts_sb3_zoo.py, in the venv
  of bench/requirements-peers.txt), ``model.save`` every EVERY env steps;
- CleanRL: the case's single-file script with its defaults (only the env, seed and budget given, on the CPU),
  run as it is from a checkout (bench/requirements-cleanrl.txt), its network saved with ``torch.save`` every
  EVERY env steps (bench/tts_cleanrl.py); none where CleanRL has no script for the case or its venv's
  gymnasium 0.29 lacks the env (LunarLander-v3 and the MuJoCo v5 envs).

Every side trains for the case's budget (the zoo's ``n_timesteps``; ``--budget`` overrides it for quick
checks), its final model counted as a checkpoint at the budget. A checkpoint's time is its file's
modification time less the moment the command started, so start-up and checkpoint writing count. Afterwards,
untimed, every checkpoint is evaluated in its side's venv (bench/tts_evaluate.py): ``--eval_episodes``
deterministic episodes, episode i reset with seed 1000 + i on every side, each side's own observation
normalisation. Printed per case, side and seed: the time and env steps to the first checkpoint whose mean
return is at or above the case's score ("not reached" and the best mean otherwise) and the final evaluation;
then one table of medians over seeds with the ratios peer / ours (above 1: ours faster) and the seeds
reaching the score on each side.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from typing import Any

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)

from peers import (
    DEFAULT_CLEANRL_DIR,
    DEFAULT_CLEANRL_PYTHON,
    DEFAULT_PEER_PYTHON,
    ROOT,
    CleanRLScripts,
    Ours,
    Side,
    StableBaselines3,
    _rotated,
    _thread_env,
)

from common.errors import UserError

ZOO_FILE = os.path.join(BENCH, "zoo_hyperparams.toml")
EVAL_SEED = 1000  # episode i of every evaluation starts from reset(seed=EVAL_SEED + i)
NETWORK_KINDS = {"agent": "agent", "q_network": "q", "actor": "actor"}  # a CleanRL script's global -> how it acts


@dataclass(frozen=True)
class CleanRLScript:
    """A CleanRL script of a case and the global holding the network it trains."""

    script: str  # path inside the CleanRL checkout
    network: str  # "agent" (ppo.py), "q_network" (dqn.py), "actor" (ddpg, td3, sac)


@dataclass(frozen=True)
class Case:
    """One time-to-score comparison: an env and algorithm, the score, and each side's way to train it."""

    name: str
    env: str
    alg: str  # ours
    score: float
    every: int  # env steps between checkpoints
    zoo: tuple[str, str]  # rl-zoo's algorithm and the env id of its entry in bench/zoo_hyperparams.toml
    cleanrl: CleanRLScript | None = None


PPO, DQN = CleanRLScript("cleanrl/ppo.py", "agent"), CleanRLScript("cleanrl/dqn.py", "q_network")
DDPG = CleanRLScript("cleanrl/ddpg_continuous_action.py", "actor")
TD3 = CleanRLScript("cleanrl/td3_continuous_action.py", "actor")
SAC = CleanRLScript("cleanrl/sac_continuous_action.py", "actor")

CASES = [
    Case("ppo2-cartpole", "CartPole-v1", "ppo2", 475, 4096, ("ppo", "CartPole-v1"), PPO),
    Case("deepq-cartpole", "CartPole-v1", "deepq", 475, 2500, ("dqn", "CartPole-v1"), DQN),
    Case("ppo2-acrobot", "Acrobot-v1", "ppo2", -100, 16_384, ("ppo", "Acrobot-v1"), PPO),
    Case("ddpg-pendulum", "Pendulum-v1", "ddpg", -200, 1000, ("ddpg", "Pendulum-v1"), DDPG),
    Case("td3-pendulum", "Pendulum-v1", "td3", -200, 1000, ("td3", "Pendulum-v1"), TD3),
    Case("sac-pendulum", "Pendulum-v1", "sac", -200, 1000, ("sac", "Pendulum-v1"), SAC),
    Case("ddpg-mountaincar", "MountainCarContinuous-v0", "ddpg", 90, 10_000,
         ("ddpg", "MountainCarContinuous-v0"), DDPG),
    Case("ppo2-lunarlander", "LunarLander-v3", "ppo2", 200, 32_768, ("ppo", "LunarLander-v3")),
    Case("ppo2-halfcheetah", "HalfCheetah-v5", "ppo2", 3000, 50_000, ("ppo", "HalfCheetah-v4")),
    Case("sac-halfcheetah", "HalfCheetah-v5", "sac", 5000, 50_000, ("sac", "HalfCheetah-v4")),
    Case("td3-hopper", "Hopper-v5", "td3", 2500, 50_000, ("td3", "Hopper-v4")),
]


def zoo_entry(case: Case, path: str = ZOO_FILE) -> dict[str, Any]:
    """The zoo's entry of ``case`` from bench/zoo_hyperparams.toml."""
    with open(path, "rb") as f:
        return tomllib.load(f)[case.zoo[0]][case.zoo[1]]


def budget_of(case: Case, override: int | None = None) -> int:
    """The env steps every side trains ``case`` for: the zoo's ``n_timesteps`` unless overridden."""
    return override if override is not None else int(zoo_entry(case)["n_timesteps"])


@dataclass(frozen=True)
class Checkpoint:
    """A saved model: env steps, seconds from the command's start to the file, and the file."""

    steps: int
    seconds: float
    path: str


def checkpoints_in(folder: str, suffix: str, started: float) -> list[Checkpoint]:
    """The checkpoints ``<steps><suffix>`` in ``folder``, by steps, timed by their modification times."""
    return earliest_per_step(_files(folder, suffix, started))


def earliest_per_step(checkpoints: list[Checkpoint]) -> list[Checkpoint]:
    """The checkpoints by steps, only the earliest where several hold the same steps (a periodic checkpoint
    and the final model)."""
    first: dict[int, Checkpoint] = {}
    for c in sorted(checkpoints, key=lambda c: (c.steps, c.seconds)):
        first.setdefault(c.steps, c)
    return list(first.values())


def _files(folder: str, suffix: str, started: float) -> list[Checkpoint]:
    found = []
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        match = re.fullmatch(r"(\d+)" + re.escape(suffix), name)
        if match:
            path = os.path.join(folder, name)
            found.append(Checkpoint(int(match.group(1)), os.path.getmtime(path) - started, path))
    return found


@dataclass(frozen=True)
class Outcome:
    """One side's run of one case and seed, evaluated: (steps, seconds, mean return) per checkpoint."""

    points: list[tuple[int, float, float]]

    def reached(self, score: float) -> tuple[int, float] | None:
        """Env steps and seconds of the first checkpoint at or above ``score`` (None: never)."""
        return next(((s, t) for s, t, mean in self.points if mean >= score), None)

    @property
    def final(self) -> float:
        return self.points[-1][2] if self.points else math.nan

    @property
    def best(self) -> float:
        return max((mean for _, _, mean in self.points), default=math.nan)


def _run(cmd: list[str], cwd: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"time_to_score: {' '.join(cmd[:4])} ... failed (exit {out.returncode}):\n"
                         f"{out.stderr[-3000:]}")
    return out.stdout


def _evaluations(stdout: str) -> dict[str, float]:
    rows = [json.loads(x.split(" ", 1)[1]) for x in stdout.splitlines() if x.startswith("TTS_EVAL ")]
    return {row["path"]: row["mean"] for row in rows}


class OursToScore(Ours):
    """``python -m run`` with the shipped entry, the runner's checkpoints every ``case.every`` env steps."""

    python = sys.executable

    def __init__(self, threads: int | None = None, extra: list[str] | None = None) -> None:
        self.threads, self.extra = threads, list(extra or [])

    def describe(self) -> str:
        return f"ours with {' '.join(self.extra)} (a trial, not the shipped entry)" if self.extra else ""

    def checkpoints(self, case: Case, seed: int, folder: str, budget: int) -> list[Checkpoint]:
        logs, final = os.path.join(folder, "logs"), os.path.join(folder, f"{budget:010d}.zip")
        cmd = [self.python, "-m", "run", f"--alg={case.alg}", f"--env={case.env}", f"--seed={seed}",
               f"--num_timesteps={budget}", f"--save_interval={case.every}", "--keep_checkpoints=0",
               f"--log_path={logs}", f"--save_path={final}", "--log_format=csv", "--no_progress", *self.extra]
        env = {**os.environ, **({"RUNNER_TF_THREADS": str(self.threads)} if self.threads else {})}
        started = time.time()
        _run(cmd, ROOT, env)
        return earliest_per_step(_files(os.path.join(logs, "checkpoints"), ".zip", started)
                                 + _files(folder, ".zip", started))

    def evaluation(self, case: Case) -> tuple[str, dict[str, Any], dict[str, str] | None]:
        return self.python, {"side": "ours"}, None


class ZooToScore(StableBaselines3):
    """stable-baselines3 with rl-zoo's entry (bench/tts_sb3_zoo.py in the peers' venv)."""

    name = "SB3 + rl-zoo"

    def __init__(self, python: str, threads: int | None = None) -> None:
        super().__init__(python)
        self.threads = threads

    def checkpoints(self, case: Case, seed: int, folder: str, budget: int) -> list[Checkpoint]:
        job = {"algo": case.zoo[0], "env": case.env, "entry": zoo_entry(case), "seed": seed, "timesteps": budget,
               "folder": folder, "every": case.every, "threads": self.threads}
        started = time.time()
        out = _run([self.python, os.path.join(BENCH, "tts_sb3_zoo.py"), json.dumps(job)], folder,
                   _thread_env(self.threads))
        self.versions = next((x.split(" ", 1)[1] for x in out.splitlines() if x.startswith("TTS_VERSIONS ")), "")
        return checkpoints_in(folder, ".zip", started)

    def evaluation(self, case: Case) -> tuple[str, dict[str, Any], dict[str, str] | None]:
        return self.python, {"side": "sb3", "algo": case.zoo[0]}, None


def cleanrl_flags(case: Case, seed: int, budget: int) -> list[str]:
    """The script's flags: the env, seed and budget on the CPU; its defaults for everything else."""
    return [f"--env-id={case.env}", f"--seed={seed}", f"--total-timesteps={budget}", "--no-cuda"]


class CleanRLToScore(CleanRLScripts):
    """CleanRL's script for the case with its defaults (bench/tts_cleanrl.py in CleanRL's venv)."""

    def __init__(self, python: str, checkout: str, threads: int | None = None) -> None:
        super().__init__(python, checkout)
        self.threads = threads

    def applies(self, case: Case) -> bool:
        return case.cleanrl is not None

    def checkpoints(self, case: Case, seed: int, folder: str, budget: int) -> list[Checkpoint]:
        assert case.cleanrl is not None
        job = {"script": os.path.join(self.checkout, case.cleanrl.script), "network": case.cleanrl.network,
               "flags": cleanrl_flags(case, seed, budget), "folder": folder, "every": case.every}
        started = time.time()
        _run([self.python, os.path.join(BENCH, "tts_cleanrl.py"), json.dumps(job)], folder, self._env(self.threads))
        return checkpoints_in(folder, ".pt", started)

    def evaluation(self, case: Case) -> tuple[str, dict[str, Any], dict[str, str] | None]:
        assert case.cleanrl is not None
        return self.python, {"side": "cleanrl", "script": os.path.join(self.checkout, case.cleanrl.script),
                             "kind": NETWORK_KINDS[case.cleanrl.network]}, self._env(None)


def evaluate(side: Any, case: Case, checkpoints: list[Checkpoint], episodes: int) -> Outcome:
    """Every checkpoint's mean return over ``episodes`` deterministic episodes, in the side's venv."""
    python, job, env = side.evaluation(case)
    job = {**job, "env": case.env, "checkpoints": [c.path for c in checkpoints],
           "seeds": [EVAL_SEED + i for i in range(episodes)]}
    means = _evaluations(_run([python, os.path.join(BENCH, "tts_evaluate.py"), json.dumps(job)], ROOT, env))
    return Outcome([(c.steps, c.seconds, means[c.path]) for c in checkpoints])


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else math.nan


def median_time(outcomes: list[Outcome], score: float) -> float:
    """The median over seeds of the seconds to the score, counting a seed that never reached it as infinite
    (nan when no seed did)."""
    times = [r[1] if (r := o.reached(score)) else math.inf for o in outcomes]
    median = _median(times)
    return median if math.isfinite(median) else math.nan


def ratio(peer: float, ours: float) -> str:
    """``peer / ours`` as "2.50x" ("-" when either side has no time)."""
    return f"{peer / ours:.2f}x" if math.isfinite(peer) and math.isfinite(ours) and ours > 0 else "-"


def seed_rows(case: Case, side: str, seeds: list[int], outcomes: list[Outcome]) -> list[str]:
    """One line per seed: time and steps to the score (or its best), the final evaluation."""
    rows = []
    for seed, outcome in zip(seeds, outcomes, strict=True):
        hit = outcome.reached(case.score)
        to_score = (f"{hit[1]:.1f} s / {hit[0]:,} steps" if hit else f"not reached (best {outcome.best:.1f})")
        rows.append(f"| {case.name} | {side} | {seed} | {to_score} | {outcome.final:.1f} |")
    return rows


def summary_row(case: Case, sides: list[str], runs: dict[str, list[Outcome]]) -> str:
    """The case's row: the median time to score per side, ratios peer / ours, seeds reaching the score."""
    times = {s: median_time(runs[s], case.score) if s in runs else math.nan for s in sides}
    cells = [f"{times[s]:.1f} s" if math.isfinite(times[s]) else ("not reached" if s in runs else "-")
             for s in sides]
    ratios = [ratio(times[s], times[sides[0]]) if s in runs else "-" for s in sides[1:]]
    reaching = ", ".join(f"{sum(o.reached(case.score) is not None for o in runs[s])}/{len(runs[s])}"
                          if s in runs else "-" for s in sides)
    return f"| {case.name} | {case.score:g} | {' | '.join(cells)} | {' | '.join(ratios)} | {reaching} |"


def summary_table(cases: list[Case], sides: list[str], runs: dict[tuple[str, str], list[Outcome]]) -> list[str]:
    """The markdown table of medians over seeds, one row per case."""
    head = ["case", "score", *(f"{s} (median)" for s in sides), *(f"{s} / ours" for s in sides[1:]),
            "seeds reaching (" + ", ".join(sides) + ")"]
    rows = ["| " + " | ".join(head) + " |", "| --- | ---: |" + " ---: |" * (len(head) - 2)]
    for case in cases:
        rows.append(summary_row(case, sides, {s: runs[(case.name, s)] for s in sides if (case.name, s) in runs}))
    return rows


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cases", nargs="+", choices=[c.name for c in CASES] + ["all"], metavar="CASE",
                   help="cases to run: " + ", ".join(c.name for c in CASES) + ", or all")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--peers", nargs="*", choices=["sb3", "cleanrl"], default=["sb3", "cleanrl"])
    p.add_argument("--eval_episodes", type=int, default=10)
    p.add_argument("--budget", type=int, default=None, help="env steps of every side (default: the zoo's budget)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads of every side (torch's; ours through RUNNER_TF_THREADS); default: each library's "
                   "own choice, what its users get")
    p.add_argument("--ours_args", default="",
                   help="extra flags for ours, to try settings on tuning seeds before an entry changes (the "
                   "output names them; published tables use the shipped entry, without this)")
    p.add_argument("--keep", default=None, help="folder that keeps the runs (default: a temporary one)")
    p.add_argument("--peer_python", default=DEFAULT_PEER_PYTHON, help="python of the stable-baselines3 venv")
    p.add_argument("--cleanrl_python", default=DEFAULT_CLEANRL_PYTHON, help="python of the CleanRL venv")
    p.add_argument("--cleanrl_dir", default=DEFAULT_CLEANRL_DIR, help="a checkout of CleanRL's repository")
    return p


def sides_from(args: argparse.Namespace) -> list[Side]:
    """Ours first, then the peers asked for; raises PeerMissing for a peer that is not installed."""
    peers: dict[str, Side] = {"sb3": ZooToScore(args.peer_python, args.threads),
                              "cleanrl": CleanRLToScore(args.cleanrl_python, args.cleanrl_dir, args.threads)}
    chosen = [peers[name] for name in args.peers]
    for side in chosen:
        side.check()
    return [OursToScore(args.threads, shlex.split(args.ours_args)), *chosen]


def run_cases(cases: list[Case], sides: list[Side], args: argparse.Namespace, root: str
              ) -> dict[tuple[str, str], list[Outcome]]:
    """Train every case, seed and side interleaved (the side order rotating with the seed), then evaluate."""
    trained: dict[tuple[str, str], list[tuple[Side, list[Checkpoint]]]] = {}
    for seed in args.seeds:
        for case in cases:
            budget = budget_of(case, args.budget)
            for side in _rotated([s for s in sides if s.applies(case)], seed):
                folder = os.path.join(root, case.name, side.name.replace(" ", ""), str(seed))
                os.makedirs(folder, exist_ok=True)
                points = side.checkpoints(case, seed, folder, budget)  # type: ignore[attr-defined]
                trained.setdefault((case.name, side.name), []).append((side, points))
                print(f"# {case.name} {side.name} seed {seed}: {len(points)} checkpoints, last at "
                      f"{points[-1].seconds if points else math.nan:.1f} s, load {os.getloadavg()[0]:.2f}",
                      flush=True)
    return {key: [evaluate(side, next(c for c in cases if c.name == key[0]), points, args.eval_episodes)
                  for side, points in runs] for key, runs in trained.items()}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        sides = sides_from(args)
    except UserError as e:
        print(f"time_to_score: error: {e}", file=sys.stderr)
        return 2
    cases = [c for c in CASES if "all" in args.cases or c.name in args.cases]
    load_before, started = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="time-to-score-") as scratch:
        runs = run_cases(cases, sides, args, args.keep or scratch)
    load_after = os.getloadavg()
    names = [s.name for s in sides]
    described = "; ".join(filter(None, (s.describe() for s in sides)))
    print(f"\n{started}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average before "
          f"{load_before[0]:.2f}, after {load_after[0]:.2f}; {described}; seeds {' '.join(map(str, args.seeds))}; "
          f"{args.eval_episodes} deterministic evaluation episodes per checkpoint\n")
    print("| case | side | seed | time / env steps to the score | final evaluation |")
    print("| --- | --- | ---: | --- | ---: |")
    for case in cases:
        for name in names:
            if (case.name, name) in runs:
                print("\n".join(seed_rows(case, name, args.seeds, runs[(case.name, name)])))
    print()
    print("\n".join(summary_table(cases, names, runs)))
    print("\nbudgets (env steps, every side): " + ", ".join(f"{c.name} {budget_of(c, args.budget):,} "
                                                            f"(checkpoint every {c.every:,})" for c in cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark suites: train (algorithm, env, seed) runs one after the other, then tabulate them.

    .venv/bin/python bench/suite.py classic [--seeds 0 1 2] [--root bench/runs] [--report-only]
    .venv/bin/python bench/suite.py minatar --algs deepq rainbow  (needs requirements-minatar.txt)
    .venv/bin/python bench/suite.py multiagent   (PettingZoo parallel envs: pip install -r requirements-pettingzoo.txt)
    .venv/bin/python bench/suite.py robotics     (her on the Fetch tasks: pip install -r requirements-robotics.txt)

Each run is ``python -m run`` with the runner's own defaults (no hyperparameter flags) and
``--eval_freq`` at 1/20 of its budget, in ``<root>/<alg>/<env>/seed<k>/`` (log folder ``log/``, final
model ``model.zip``, ``run.json`` with the command, wall time and exit status). A run whose
``run.json`` says it finished is skipped, and a run stopped on the way continues from its newest checkpoint
(``--resume``; wall time summed over the attempts), so an interrupted suite continues where it stopped. Then
``docs/benchmarks.md`` gets the suite's table: the final model's deterministic evaluation (10 episodes;
the last row of ``evaluations.csv``) per seed (a seed whose run is stopped or still running shows its newest
evaluation, a failed one its exit status), median and spread over seeds, wall time, env steps/s, the
reference figure, the exact command and the commit; and ``docs/benchmarks/<suite>-<alg>-<env>.png`` the
evaluation return against env steps (median over seeds, min-max band). A rewrite keeps the seeds a row already
published and that have no finished run under ``--root`` (runs made on another machine or root: their final
evaluations join the median and their commits the commit column; the wall time and the curve are then those of
the runs under ``--root``), and the notes written by hand between the table and the commands.
Runs on seeds 10-14 (``--seeds 10 11 12 13 14``: seeds no shipped entry was chosen on) fill the row's last column,
their median, spread and per-seed results, beside the row's own seeds and never mixed into its median, and
say so when that median is under the rl-baselines3-zoo figure the row's reference quotes. The ``robotics``
suite reports the success rate (the share of 100 evaluation episodes that end at the goal) instead of the return.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


@dataclasses.dataclass(frozen=True)
class Spec:
    """One (algorithm, env) entry of a suite; ``reference`` is a published figure and its source."""

    alg: str
    env: str
    steps: int
    reference: str = ""
    flags: tuple[str, ...] = ()  # runner flags (not hyperparameters), e.g. --num_env=8
    metric: str = "return_mean"  # the evaluations.csv column reported: return_mean or success_rate


ZOO = "rl-baselines3-zoo"
# Seeds no shipped entry was chosen on (entries are tuned on 100-102 and reported on 0-2): a run on them goes to its
# own column, beside the row's seeds, never into the row's median.
UNSEEN_SEEDS = (10, 11, 12, 13, 14)
UNSEEN_HEADING = "seeds 10-14 (chose no entry): median (min..max; per seed)"
ROW_CELLS = 11  # the cells of a result row before the unseen-seeds cell (alg ... commit)
# exit statuses of a run stopped by Ctrl-C or SIGTERM (it saves a checkpoint; the suite's next call resumes it)
STOPPED_CODES = (130, 143, -2, -15)
# Butterfly-Baselines' pistonball observations (grey as the mean of the colours, 96x96 by linear interpolation,
# 4 frames) through SuperSuit's functions of parallel envs
PISTONBALL_WRAPPERS = ("--wrapper=supersuit:color_reduction_v0(mode='full')",
                       "--wrapper=supersuit:resize_v1(x_size=96, y_size=96, linear_interp=True)",
                       "--wrapper=supersuit:frame_stack_v1(stack_size=4)")
# An Atari (or MinAtar) evaluation plays its 10 episodes (thousands of steps each) on 5 envs, one policy call per
# step for all.
ATARI_EVAL = ("--eval_envs=5",)
# The MinAtar paper's DQN at 1M frames (= env steps), read off its learning curves (Young and Tian 2019,
# arXiv:1903.03176; the figure is img/learning_curves.gif of github.com/kenjyoung/MinAtar): the mean over 30 runs
# of the moving average of 100 training returns (epsilon 0.1, all 6 actions as in -v0, sticky actions 0.1). Range
# read between 0.9M and 1.1M frames.
MINATAR_DQN_1M = {"Breakout": "9.2 (8.8..9.3)", "SpaceInvaders": "33 (31..33)", "Asterix": "7.1 (4.3..9.3)",
                  "Freeway": "47.8 (47.0..48.5)", "Seaquest": "1.0 (1.0..1.0)"}
# The classic and box2d suites: every algorithm on every env its action space fits, with no flags at all, at
# rl-baselines3-zoo's budget for that algorithm and env (its benchmark.md; v1/v2 ids there, v0/v1/v3 here) capped
# at 1M steps; algorithms the zoo does not list use the nearest one's (rainbow: DQN's; tqc on Pendulum: SAC's).
# The mark a row must reach is 80% of the way from a uniform random policy (bench/random_policy.py, 100 episodes)
# to the zoo's tuned result.
RANDOM_RETURN = {"CartPole-v1": 25.0, "Acrobot-v1": -500.0, "MountainCar-v0": -200.0,
                 "MountainCarContinuous-v0": -33.3, "Pendulum-v1": -1197.2, "LunarLander-v3": -191.0,
                 "LunarLanderContinuous-v3": -206.7}
# (zoo's algorithm, its mean reward, its budget) per (algorithm here, env)
ZOO_TUNED: dict[tuple[str, str], tuple[str, float, int]] = {
    **{("ppo2", env): ("PPO", r, n) for env, r, n in (
        ("CartPole-v1", 500.0, 100_000), ("Acrobot-v1", -73.5, 1_000_000), ("MountainCar-v0", -110.4, 1_000_000),
        ("MountainCarContinuous-v0", 88.3, 20_000), ("Pendulum-v1", -172.2, 100_000),
        ("LunarLander-v3", 242.1, 1_000_000), ("LunarLanderContinuous-v3", 270.9, 1_000_000))},
    **{("a2c", env): ("A2C", r, n) for env, r, n in (
        ("CartPole-v1", 500.0, 500_000), ("Acrobot-v1", -83.4, 500_000), ("MountainCar-v0", -111.3, 1_000_000),
        ("MountainCarContinuous-v0", 91.2, 100_000), ("Pendulum-v1", -163.0, 1_000_000),
        ("LunarLander-v3", 155.8, 200_000), ("LunarLanderContinuous-v3", 84.2, 5_000_000))},
    **{("trpo", env): ("TRPO", r, n) for env, r, n in (
        ("CartPole-v1", 500.0, 100_000), ("Acrobot-v1", -83.1, 100_000), ("MountainCar-v0", -107.3, 100_000),
        ("MountainCarContinuous-v0", 92.5, 50_000), ("Pendulum-v1", -174.6, 100_000),
        ("LunarLander-v3", 133.2, 200_000), ("LunarLanderContinuous-v3", 262.4, 200_000))},
    **{(alg, env): (zoo, r, n) for alg, zoo, rows in (
        ("deepq", "DQN", ((500.0, 50_000), (-76.6, 100_000), (-100.8, 120_000), (154.4, 100_000))),
        ("qrdqn", "QR-DQN", ((500.0, 50_000), (-69.1, 100_000), (-106.0, 120_000), (70.2, 100_000))),
        ("rainbow", "DQN", ((500.0, 50_000), (-76.6, 100_000), (-100.8, 120_000), (154.4, 100_000))))
       for env, (r, n) in zip(("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3"), rows, strict=True)},
    **{(alg, env): (zoo, r, n) for alg, zoo, rows in (
        ("ddpg", "DDPG", ((93.5, 300_000), (-152.1, 20_000), (230.2, 300_000))),
        ("td3", "TD3", ((93.5, 300_000), (-151.9, 20_000), (207.5, 300_000))),
        ("sac", "SAC", ((94.7, 50_000), (-157.0, 20_000), (260.4, 500_000))),
        ("tqc", "TQC", ((63.6, 50_000), (-157.0, 20_000), (278.0, 500_000))))
       for env, (r, n) in zip(("MountainCarContinuous-v0", "Pendulum-v1", "LunarLanderContinuous-v3"), rows,
                              strict=True)},
}
BOX2D = ("LunarLander-v3", "LunarLanderContinuous-v3")


def mark(alg: str, env: str) -> float:
    """80% of the way from the random policy's return to the zoo's tuned result."""
    floor = RANDOM_RETURN[env]
    return floor + 0.8 * (ZOO_TUNED[alg, env][1] - floor)


def _fallback_spec(alg: str, env: str) -> Spec:
    zoo, result, budget = ZOO_TUNED[alg, env]
    tqc_pendulum = " (SAC's)" if (alg, env) == ("tqc", "Pendulum-v1") else ""
    return Spec(alg, env, min(budget, 1_000_000),
                f"{result:g} ({ZOO} {zoo}{tqc_pendulum}, {budget / 1e6:g}M); mark {mark(alg, env):.1f} "
                f"(random {RANDOM_RETURN[env]:g})")


SUITES: dict[str, list[Spec]] = {
    "classic": [_fallback_spec(alg, env) for alg, env in ZOO_TUNED if env not in BOX2D],
    "box2d": [*(_fallback_spec(alg, env) for alg, env in ZOO_TUNED if env in BOX2D),
              Spec("ppo2", "BipedalWalker-v3", 2_000_000, f"213 ({ZOO} PPO, 5M)")],
    "mujoco": [
        Spec("ppo2", "HalfCheetah-v5", 1_000_000, f"5819 ({ZOO} PPO); 1668.6 (baselines ppo2)"),
        Spec("ppo2", "Hopper-v5", 1_000_000, f"2410 ({ZOO} PPO); 2316.2 (baselines ppo2)"),
        Spec("ppo2", "Walker2d-v5", 1_000_000, f"3479 ({ZOO} PPO); 3425.0 (baselines ppo2)"),
        Spec("ppo2", "Ant-v5", 1_000_000, f"1327 ({ZOO} PPO)"),
        Spec("ppo2", "Swimmer-v5", 1_000_000, f"282 ({ZOO} PPO)"),
        Spec("ddpg", "HalfCheetah-v5", 300_000, "3000 (this project's target)"),
        Spec("trpo", "HalfCheetah-v5", 1_000_000, f"1785 ({ZOO} TRPO, v3)"),
        Spec("trpo", "Hopper-v5", 1_000_000, f"3618 ({ZOO} TRPO, v3); 3000 (this project's target)"),
        Spec("ddpg", "Hopper-v5", 300_000, f"none on MuJoCo; 1157.1 ({ZOO} DDPG on PyBullet's HopperBulletEnv-v0, 1M)"),
        Spec("sac", "HalfCheetah-v5", 300_000,
             f"6000 (this project's target); 9535 ({ZOO} SAC, v3, 1M)"),
        Spec("sac", "Hopper-v5", 300_000,
             f"2500 (this project's target); 2326 ({ZOO} SAC, v3, 1M)"),
        Spec("td3", "HalfCheetah-v5", 300_000,
             f"6000 (this project's target); 9656 ({ZOO} TD3, v3, 1M)"),
        Spec("td3", "Hopper-v5", 300_000,
             f"2500 (this project's target); 3606 ({ZOO} TD3, v3, 1M)"),
        Spec("tqc", "HalfCheetah-v5", 300_000,
             f"7398.7 (sac's row here, the same budget); 12090 ({ZOO} TQC, v3, 1M)"),
        Spec("tqc", "Hopper-v5", 300_000,
             f"3417.7 (sac's row here, the same budget); 3754 ({ZOO} TQC, v3, 1M)"),
    ],
    # Returns are per agent (each agent's own episode return, mean over agents); --num_timesteps counts agent steps.
    "multiagent": [
        Spec("ppo2", "envs.pettingzoo_toys:gather_v0", 50_000, "0.79 (walk straight to the goal; a smoke run)",
             ("--num_env=4",)),
        Spec("ppo2", "mpe2:simple_spread_v3", 20_000_000,
             "-7.5 (parameter-shared MAPPO, 60M agent steps) .. -12.5 (weaker runs, 30M): about -120 and -150 on "
             "the original MPE's scale (docs/multi-agent.md); random -27.6",
             ("--num_env=16",)),
        Spec("ppo2", "pettingzoo.butterfly:pistonball_v6", 2_000_000,
             "97.5 (96.3..98.2) per piston: Butterfly-Baselines' parameter-shared PPO, pistonball_v4, 10 runs, 2M; "
             "random -4.6", PISTONBALL_WRAPPERS),
    ],
    # One process, the shipped her entries; evaluations over 100 episodes, reported as success rates.
    "robotics": [
        Spec("her", "FetchPush-v4", 1_000_000,
             f"0.9 (target); about 1.0 ({ZOO} TQC: return -8.8 at 1M, 3,000 episodes); 0.075 (a still arm)",
             ("--eval_episodes=100",), "success_rate"),
        Spec("her", "FetchPickAndPlace-v4", 1_000_000, f"no success rate published ({ZOO} trains TQC for 1M)",
             ("--eval_episodes=100",), "success_rate"),
    ],
    "atari-short": [
        Spec("ppo2", "PongNoFrameskip-v4", 2_500_000,
             f"+18 (target; 10M frames); 21.0 ({ZOO} PPO, 10M steps = 40M frames)",
             ("--num_env=8", *ATARI_EVAL)),
        Spec("ppo2", "BreakoutNoFrameskip-v4", 2_500_000, f"398.0 ({ZOO} PPO, 10M steps = 40M frames)",
             ("--num_env=8", *ATARI_EVAL)),
        Spec("deepq", "PongNoFrameskip-v4", 1_000_000, f"20.6 ({ZOO} DQN, 10M steps = 40M frames)",
             ATARI_EVAL),
        Spec("rainbow", "PongNoFrameskip-v4", 1_000_000, f"+15 (target); 20.6 ({ZOO} DQN, 10M steps = 40M frames)",
             ATARI_EVAL),
    ],
    "minatar": [Spec(alg, f"MinAtar/{game}-v1", 1_000_000, f"{ref} (MinAtar paper's DQN at 1M frames)", ATARI_EVAL)
                for game, ref in MINATAR_DQN_1M.items() for alg in ("ppo2", "deepq", "rainbow", "qrdqn")],
}


def file_name(env: str) -> str:
    """``env`` as one file or folder name (MinAtar's ids hold a slash)."""
    return env.replace("/", "_")


def run_dir(root: str, spec: Spec, seed: int) -> str:
    return os.path.join(root, spec.alg, file_name(spec.env), f"seed{seed}")


def command(spec: Spec, seed: int, folder: str) -> list[str]:
    """The runner command of one run (relative paths as a user would type them, folder absolute); a flag of the
    spec replaces the suite's default of the same name."""
    given = {flag.split("=", 1)[0] for flag in spec.flags}
    evaluation = [flag for flag in (f"--eval_freq={max(spec.steps // 20, 1)}", "--eval_episodes=10")
                  if flag.split("=", 1)[0] not in given]
    return [sys.executable, "-m", "run", f"--alg={spec.alg}", f"--env={spec.env}", f"--num_timesteps={spec.steps}",
            f"--seed={seed}", *evaluation, f"--log_path={os.path.join(folder, 'log')}",
            f"--save_path={os.path.join(folder, 'model.zip')}", "--log_format=csv,log", "--no_progress", *spec.flags]


def train(spec: Spec, seed: int, root: str) -> dict:
    """Run one (alg, env, seed) unless ``run.json`` says it finished; returns its record."""
    folder = run_dir(root, spec, seed)
    record_path, log = os.path.join(folder, "run.json"), os.path.join(folder, "log")
    record = None
    if os.path.exists(record_path):
        with open(record_path, encoding="utf-8") as f:
            record = json.load(f)
        if record.get("returncode") == 0:
            return record
    cmd = command(spec, seed, folder)
    shown = " ".join(["python", *cmd[1:]])
    earlier = _interrupted(record, os.path.join(log, "resume"))
    if earlier is not None:  # an interrupted attempt with a checkpoint: continue it
        run_cmd = [sys.executable, "-m", "run", f"--resume={log}", *_command_line_only(cmd), "--no_progress"]
        earlier_s, resumed = earlier["wall_s"], {"resumed": earlier.get("resumed", 0) + 1}
    else:
        shutil.rmtree(log, ignore_errors=True)  # an unfinished attempt's logs, without a checkpoint
        run_cmd, earlier_s, resumed = cmd, 0.0, {}
    os.makedirs(folder, exist_ok=True)
    print(f"[suite] {spec.alg} {spec.env} seed {seed}: {' '.join(run_cmd[1:])}", flush=True)
    t0 = time.time()
    # the code each attempt ran with (a run reads its modules when it starts)
    commits = _attempt_commits(earlier)
    with open(os.path.join(folder, "output.txt"), "a" if earlier else "w", encoding="utf-8") as out:
        with open(record_path, "w", encoding="utf-8") as f:  # read by a later attempt if this one is stopped
            json.dump({"command": shown, "returncode": None, "wall_s": earlier_s, "started": t0, "commit": commits,
                       **resumed}, f, indent=1)
        rc = subprocess.call(run_cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    record = {"command": shown, "returncode": rc, "wall_s": earlier_s + time.time() - t0, "steps": spec.steps,
              "commit": commits, "finished": time.strftime("%Y-%m-%d %H:%M"), **resumed}
    with open(record_path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    print(f"[suite]   exit {rc} after {record['wall_s']:.0f} s", flush=True)
    return record


def _command_line_only(cmd: list[str]) -> list[str]:
    """The flags of ``cmd`` that a resumed run takes only from the command line (code and output paths:
    common/trust.py), as given."""
    from common.trust import command_line_only
    kept = []
    for token in cmd:
        flag, _, value = token.partition("=")
        if flag.startswith("--") and value and command_line_only(flag[2:], value):
            kept.append(token)
    return kept


def _interrupted(record: dict | None, resume: str) -> dict | None:
    """``record`` (an unfinished attempt's ``run.json``) when the attempt left a checkpoint in ``resume``, with
    its wall time counted up to its newest checkpoint when it was killed; else None."""
    checkpoints = os.listdir(resume) if record is not None and os.path.isdir(resume) else []
    if not checkpoints:
        return None
    if record.get("returncode") is None and "started" in record:  # killed: count its time up to its checkpoint
        newest = max(os.path.getmtime(os.path.join(resume, n)) for n in checkpoints)
        record = {**record, "wall_s": record["wall_s"] + max(newest - record["started"], 0.0)}
    return record


def _attempt_commits(earlier: dict | None) -> str:
    """The commits of the earlier attempts of a run (their record's "commit") and this one's, comma-separated."""
    seen = [c.strip() for c in (earlier or {}).get("commit", "").split(",") if c.strip()]
    return ", ".join(dict.fromkeys([*seen, _commit()]))


def _commit(root: str = ROOT) -> str:
    """The checkout's short commit, with ``+changes`` when tracked files differ from it (the run did not use it)."""
    try:
        head = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=root, text=True).strip()
        changed = subprocess.run(["git", "diff", "--quiet", "HEAD"], check=False, cwd=root).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if changed else "")


# What a suite's table reports: the final model's 10-episode return, or what this says.
RESULTS = {"robotics": "Final model, deterministic evaluation over 100 episodes: the success rate (the share of episodes "
                       "that end at the goal)"}


def final_evaluation(folder: str, metric: str = "return_mean") -> tuple[float | None, list[tuple[int, float]]]:
    """(final evaluation, [(steps, evaluation)...]) of the ``log/evaluations.csv`` column ``metric``; the final
    model's evaluation is the row at the last step count."""
    from common.logs.curves import read_evaluations

    cols = read_evaluations(os.path.join(folder, "log"))
    if cols is None or metric not in cols:
        return None, []
    curve = list(zip(cols["timesteps"].astype(int).tolist(), cols[metric].tolist(), strict=True))
    return curve[-1][1], curve


def _num(value: float, metric: str) -> str:
    """A result as the tables write it: returns with one decimal, success rates with two."""
    return f"{value:.2f}" if metric == "success_rate" else f"{value:.1f}"


def report(suite: str, seeds: list[int], root: str, out_md: str) -> str:
    """The suite's markdown section (and its PNGs). A row with no finished run under ``root`` keeps what the
    section in ``out_md`` already had for it (runs made on another machine or root), and so do the notes
    written by hand between the table and the commands, and the commands of those rows."""
    kept = _existing_section(out_md, suite)
    lines = [f"## Suite `{suite}`", "",
             RESULTS.get(suite, "Final model, deterministic evaluation over 10 episodes (env's own reward units)")
             + (", per seed; median and min..max over seeds. Wall time is the median per run on this machine (2 cores, "
                "shared). The last column holds runs on seeds 10-14, on which no shipped entry was chosen (entries are "
                "tuned on seeds 100-102), beside the row's own seeds and outside its median; it says so when that "
                "median is under the rl-baselines3-zoo figure of the reference."), "",
             (f"| alg | env | env steps | seeds | median | min..max | per seed | wall (s) | steps/s | reference | commit | "
              f"{UNSEEN_HEADING} |"),
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    commands = []
    row_seeds = [seed for seed in seeds if seed not in UNSEEN_SEEDS]
    for spec in SUITES[suite]:
        finals, walls, curves, commits = [], [], [], set()
        finished, unfinished = _seed_runs(spec, root, row_seeds)
        for seed, rec, final, curve in finished:
            finals.append((seed, final))
            walls.append(rec["wall_s"])
            curves.append(curve)
            commits.update(c.strip() for c in rec.get("commit", "?").split(","))
            commands.append(rec["command"])
        pair_commands = [c for c in kept.commands if f"--alg={spec.alg} --env={spec.env} " in c]
        commands += pair_commands
        # seeds published earlier (another machine or root) join this row only when they ran this command
        same_budget = [c for c in pair_commands if f"--num_timesteps={spec.steps} " in c]
        earlier, flagged, published_at_budget = None, None, False
        for row in kept.rows.get((spec.alg, spec.env), []):
            at_budget = _cells(row)[2] == f"{spec.steps:,}"
            published_at_budget |= at_budget
            if at_budget and all(c == generic_command(spec) for c in same_budget):
                earlier = row
            else:  # another budget or other flags: its own row; the seeds of different commands are not mixed
                lines.append(row if len(_cells(row)) > ROW_CELLS else _with_unseen(row, "not run"))
                flagged = lines[-1] if at_budget else flagged
        unseen = _unseen_cell(spec, root, earlier, commands)
        if earlier is not None and not finals:
            lines.append(_with_unseen(earlier, unseen))
            continue
        if earlier is not None:
            here = {s for s, _ in finals}
            extra = [(s, v) for s, v in _row_seeds(earlier).items() if s not in here]
            if extra:
                finals = sorted(finals + extra)
                commits.update(c.strip() for c in _cells(earlier)[10].split(",") if c.strip())
        if not finals and not unfinished and published_at_budget:
            if flagged is not None:  # that row stands for it, and carries the unseen seeds' runs
                lines[lines.index(flagged)] = _with_unseen(flagged, _unseen_cell(spec, root, flagged, commands))
            continue
        if not finals:
            state = "running" if unfinished else "not run"
            seeds_cell = "".join(f" {part}," for part in unfinished).rstrip(",")
            lines.append(f"| {spec.alg} | {spec.env} | {spec.steps:,} | 0 | {state} | |{seeds_cell} | | "
                         f"| {spec.reference} | | {unseen} |")
            continue
        values = [v for _, v in finals]
        wall = statistics.median(walls)
        m = spec.metric
        per_seed = _per_seed(finals, unfinished, m)
        lines.append(f"| {spec.alg} | {spec.env} | {spec.steps:,} | {len(values)} | {_num(statistics.median(values), m)} "
                     f"| {_num(min(values), m)}..{_num(max(values), m)} | {per_seed} | {wall:.0f} "
                     f"| {spec.steps / wall:,.0f} "
                     f"| {spec.reference} | {', '.join(sorted(commits))} | {unseen} |")
        if curves:
            _plot(curves, spec, suite, os.path.dirname(out_md))
    lines = _rows_once(lines)
    if kept.notes:
        lines += ["", kept.notes]
    lines += ["", COMMANDS_HEADING, ""]
    lines += [f"    {c}" for c in sorted({_generic(c) for c in commands})]
    return "\n".join(lines) + "\n"


def _seed_runs(spec: Spec, root: str, seeds) -> tuple[list[tuple[int, dict, float, list]], list[str]]:
    """The runs of ``spec`` on ``seeds`` under ``root`` that have a record: the finished ones as (seed,
    ``run.json``, final evaluation, evaluation curve), and the per-seed cells of the others (``_unfinished``)."""
    finished, unfinished = [], []
    for seed in seeds:
        folder = run_dir(root, spec, seed)
        record_path = os.path.join(folder, "run.json")
        if not os.path.exists(record_path):
            continue
        with open(record_path, encoding="utf-8") as f:
            rec = json.load(f)
        final, curve = final_evaluation(folder, spec.metric)
        if rec.get("returncode") != 0 or final is None:
            unfinished.append(_unfinished(seed, rec, curve, spec.metric))
        else:
            finished.append((seed, rec, final, curve))
    return finished, unfinished


def _per_seed(finals: list[tuple[int, float]], unfinished: list[str], metric: str = "return_mean") -> str:
    """A per-seed cell: "seed: final" of the finished runs, then the cells of the unfinished ones."""
    return ", ".join([*(f"{seed}: {_num(value, metric)}" for seed, value in finals), *unfinished])


def _rows_once(lines: list[str]) -> list[str]:
    """``lines`` with each result row once: of rows equal in their first ``ROW_CELLS`` cells (a row published as is and the
    same row rebuilt from the runs, with its unseen-seeds cell, after it), the last, at the first one's place."""
    last = {tuple(_cells(line)[:ROW_CELLS]): line for line in lines if line.startswith("| ")}
    out, seen = [], set()
    for line in lines:
        key = tuple(_cells(line)[:ROW_CELLS]) if line.startswith("| ") else None
        if key is None:
            out.append(line)
        elif key not in seen:
            seen.add(key)
            out.append(last[key])
    return out


def _unseen_cell(spec: Spec, root: str, earlier: str | None, commands: list[str]) -> str:
    """The row's cell for the runs on ``UNSEEN_SEEDS`` under ``root`` (their commands join ``commands``); without
    any, what ``earlier`` (the row as published) had, else "not run"."""
    finished, unfinished = _seed_runs(spec, root, UNSEEN_SEEDS)
    finals = [(seed, final) for seed, _, final, _ in finished]
    commands += [rec["command"] for _, rec, _, _ in finished]
    if not finals and not unfinished:
        published = _cells(earlier) if earlier is not None else []
        cell = published[ROW_CELLS] if len(published) > ROW_CELLS and published[ROW_CELLS] else "not run"
        return _said_when_under(cell, spec)
    m = spec.metric
    per_seed = _per_seed(finals, unfinished, m)
    if not finals:
        return per_seed
    values = [v for _, v in finals]
    cell = f"{_num(statistics.median(values), m)} ({_num(min(values), m)}..{_num(max(values), m)}; {per_seed})"
    return _said_when_under(cell, spec)


def _said_when_under(cell: str, spec: Spec) -> str:
    """An unseen-seeds ``cell`` ("median (min..max; per seed)") that says so when its median is under the
    rl-baselines3-zoo figure of the row's reference."""
    median, reference = re.match(r"(-?[\d.]+) \(", cell), zoo_figure(spec.reference)
    if median is None or reference is None or float(median.group(1)) >= reference or "; under " in cell:
        return cell
    budget = zoo_budget(spec.reference)
    if budget is None or budget == spec.steps:
        return f"{cell}; under {ZOO}'s {reference:g}"
    return f"{cell}; under {ZOO}'s {reference:g}, which trains {_steps(budget)} steps to this row's {_steps(spec.steps)}"


def zoo_budget(reference: str) -> int | None:
    """The env steps of the rl-baselines3-zoo result a reference cell quotes ("9535 (rl-baselines3-zoo SAC, v3,
    1M)" -> 1,000,000), None when the cell gives none."""
    found = re.search(rf"-?[\d.]+ \({ZOO} (?![^)]*PyBullet)[^;]*?\b(\d+(?:\.\d+)?)M\b", reference)
    return round(float(found.group(1)) * 1e6) if found else None


def _steps(steps: int) -> str:
    """A step count as the tables write budgets in prose: 300000 -> "300k", 2500000 -> "2.5M"."""
    return f"{steps / 1e6:g}M" if steps >= 1_000_000 else f"{steps / 1e3:g}k"


def zoo_figure(reference: str) -> float | None:
    """The rl-baselines3-zoo result a reference cell quotes for the same env ("-172.2 (rl-baselines3-zoo PPO,
    0.1M); mark ..." -> -172.2), None when it quotes none."""
    found = re.search(rf"(-?[\d.]+) \({ZOO} (?![^)]*PyBullet)", reference)
    return float(found.group(1)) if found else None


def _with_unseen(row: str, unseen: str) -> str:
    """``row`` (a published result row, with or without the unseen-seeds cell) with ``unseen`` as that cell."""
    return "| " + " | ".join([*_cells(row)[:ROW_CELLS], unseen]) + " |"



def _unfinished(seed: int, record: dict, curve: list[tuple[int, float]], metric: str = "return_mean") -> str:
    """The per-seed cell of a run that has not finished: stopped or still running (with its newest evaluation),
    or failed (with its exit status)."""
    code = record.get("returncode")
    if code is not None and code != 0 and code not in STOPPED_CODES:
        return f"{seed}: failed (exit {code})"
    state = "running" if code is None else "stopped"
    if not curve:
        return f"{seed}: {state}"
    return f"{seed}: {state} ({_num(curve[-1][1], metric)} at {curve[-1][0] / 1000:g}k steps)"


COMMANDS_HEADING = "Commands (`<run>` is `<root>/<alg>/<env>/seed<seed>`):"


def _cells(row: str) -> list[str]:
    """The cells of a markdown table row."""
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _row_seeds(row: str) -> dict[int, float]:
    """The "per seed" cell of a result row ("0: 5818.8, 1: 6120.3") as {seed: final evaluation}."""
    parts = (part.split(":", 1) for part in _cells(row)[6].split(",") if ":" in part)
    return {int(seed): float(value) for seed, value in parts if re.fullmatch(r"\s*-?[\d.]+", value)}


@dataclasses.dataclass
class Section:
    """What a suite's section in docs/benchmarks.md holds: result rows by (alg, env) (each row once; a pair
    may have rows of several budgets or commands), the hand-written notes between the table and the commands,
    and the commands."""

    rows: dict[tuple[str, str], list[str]]
    notes: str
    commands: list[str]


def _existing_section(path: str, suite: str) -> Section:
    """The suite's section as ``path`` has it now (empty when there is none); rows saying "not run" or
    "running" are left out."""
    section = Section({}, "", [])
    if not os.path.exists(path):
        return section
    with open(path, encoding="utf-8") as f:
        match = re.search(rf"## Suite `{re.escape(suite)}`\n(.*?)(?=\n## Suite |\Z)", f.read(), re.DOTALL)
    if match is None:
        return section
    body, _, commands = match.group(1).partition(COMMANDS_HEADING)
    lines = body.splitlines()
    table = [i for i, line in enumerate(lines) if line.startswith("|")]
    for line in lines[table[2]:table[-1] + 1] if len(table) > 2 else []:
        cells = _cells(line)
        rows = section.rows.setdefault((cells[0], cells[1]), [])
        if len(cells) > 4 and cells[4] not in ("not run", "running") and line not in rows:
            rows.append(line)
    section.notes = "\n".join(lines[table[-1] + 1:]).strip() if table else ""
    section.commands = [c.strip() for c in commands.splitlines() if c.strip()]
    return section


def generic_command(spec: Spec) -> str:
    """The spec's command as the commands list shows it (seed and run folder as placeholders)."""
    return _generic(" ".join(["python", *command(spec, 0, os.path.join("<root>", "seed0"))[1:]]))


def _generic(cmd: str) -> str:
    """A run's command with its seed and run folder written as placeholders."""
    cmd = re.sub(r"--seed=\d+", "--seed=<seed>", cmd)
    return re.sub(r"=\S*/seed\d+/", "=<run>/", cmd)


def _plot(curves: list[list[tuple[int, float]]], spec: Spec, suite: str, docs_dir: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    steps = sorted(set.intersection(*({s for s, _ in c} for c in curves)))
    if not steps:
        return
    table = np.array([[dict(c)[s] for s in steps] for c in curves])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(steps, np.median(table, axis=0), label=f"median of {len(curves)} seeds")
    ax.fill_between(steps, table.min(axis=0), table.max(axis=0), alpha=0.25, label="min..max")
    ylabel = ("success rate (100 episodes, deterministic)" if spec.metric == "success_rate"
              else "evaluation return (10 episodes, deterministic)")
    ax.set(xlabel="env steps", ylabel=ylabel, title=f"{spec.alg} {spec.env}")
    ax.legend(loc="lower right")
    folder = os.path.join(docs_dir, "benchmarks")
    os.makedirs(folder, exist_ok=True)
    name = file_name(spec.env).replace(":", "_")  # a file of the repository: no colon (PettingZoo's module:env ids)
    fig.savefig(os.path.join(folder, f"{suite}-{spec.alg}-{name}.png"), dpi=80, bbox_inches="tight")
    plt.close(fig)


def write_markdown(path: str, suite: str, section: str) -> None:
    """Replace (or add) the suite's section in ``docs/benchmarks.md``."""
    text = ("# Benchmarks\n\nWritten by `bench/suite.py` (see its docstring). Runner defaults: no hyperparameter "
            "flags; the shipped `hyperparams/<alg>.toml` entries apply.\n\n")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
    pattern = re.compile(rf"## Suite `{re.escape(suite)}`\n.*?(?=\n+## Suite |\Z)", re.DOTALL)
    text = pattern.sub(lambda _m: section.rstrip("\n"), text) if pattern.search(text) else text + "\n" + section
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.rstrip("\n") + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("suite", choices=sorted(SUITES))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--root", default=os.path.join(ROOT, "bench", "runs"))
    p.add_argument("--only", nargs="*", default=None, help="env ids to run (default: all of the suite)")
    p.add_argument("--algs", nargs="*", default=None, help="algorithms to run (default: all of the suite)")
    p.add_argument("--report-only", action="store_true", help="write the table from finished runs only")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    p.add_argument("--steps", type=int, default=None,
                   help="every run's budget instead of the suite's (smoke checks: give another --root and --out)")
    a = p.parse_args()
    if a.steps is not None:
        SUITES[a.suite] = [dataclasses.replace(spec, steps=a.steps) for spec in SUITES[a.suite]]
    if not a.report_only:
        for seed in a.seeds:
            for spec in SUITES[a.suite]:
                if (a.only is None or spec.env in a.only) and (a.algs is None or spec.alg in a.algs):
                    train(spec, seed, a.root)
    write_markdown(a.out, a.suite, report(a.suite, a.seeds, a.root, a.out))
    print(f"[suite] wrote {a.out}")


if __name__ == "__main__":
    main()

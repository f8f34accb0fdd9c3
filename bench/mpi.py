"""MPI data-parallel speed-up: ppo2 on CpuBurn-v0 (1 ms of CPU per env step), 1 rank vs 2 ranks.

    .venv/bin/python bench/mpi.py [--timesteps 16384] [--num_env 4] [--nsteps 128] [--same_batch]

Both runs train for the same total number of env steps (``--num_timesteps`` counts all ranks) with
``mpiexec -n K python -m run`` and DummyVecEnv. By default every rank steps ``--num_env`` envs (so 2
ranks make updates of twice the batch, half as many); ``--same_batch`` gives each of the K ranks
num_env / K envs instead, so both runs make the same updates on batches of the same size.

Printed per run: env steps/s over all ranks in steady state (from the second logged update to the
last, so TF tracing and XLA compilation are left out), the same over the whole run, and the final
mean episode return: the last ``--last_episodes`` episodes to end, over all ranks' monitor files (the
logged rollout/ep_rew_mean is not comparable: it averages the last 100 episodes *of each rank*, a window twice
as long with 2 ranks). CpuBurn-v0 pays 1 per step with action 1 over 100-step episodes: random ~50,
best 100. Target: ratio >= 1.7x.
Exit status 0 when the steady-state ratio reaches the target.
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.7


def mpiexec() -> str:
    found = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if found is None:
        sys.exit("bench/mpi.py: mpiexec not found next to python or on PATH (pip install mpich mpi4py)")
    return found


def clean_env() -> dict[str, str]:
    """This environment without MPI launcher variables (the bench may itself run under a launcher)."""
    prefixes = ("PMI_", "PMIX_", "OMPI_", "MV2_", "HYDRA_", "MPI_LOCALNRANKS", "MPI_LOCALRANKID")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update({"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"})
    return env


def run_ppo2(ranks: int, num_env: int, args: argparse.Namespace) -> dict[str, float]:
    """Train on ``ranks`` processes; steps/s and final return read from progress.csv."""
    with tempfile.TemporaryDirectory(prefix="bench-mpi-") as logs:
        cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "run", "--alg=ppo2", "--env=envs:CpuBurn-v0",
               f"--num_env={num_env}", "--vec_env=dummy", f"--num_timesteps={args.timesteps}",
               f"--nsteps={args.nsteps}", f"--seed={args.seed}", f"--lr={args.lr}", "--log_interval=1",
               f"--log_path={logs}", "--log_format=csv", "--no_progress"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"bench/mpi.py: {ranks}-rank run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        with open(os.path.join(logs, "progress.csv")) as f:
            rows = [{k: float(v) for k, v in row.items() if v != ""} for row in csv.DictReader(f)]
        final_return = last_episodes_mean(logs, args.last_episodes)
    if len(rows) < 3:
        sys.exit("bench/mpi.py: fewer than 3 updates; raise --timesteps")
    first, last = rows[0], rows[-1]
    steady = ((last["time/total_timesteps"] - first["time/total_timesteps"])
              / (last["time/time_elapsed"] - first["time/time_elapsed"]))
    return {"steady": steady, "overall": last["time/total_timesteps"] / last["time/time_elapsed"],
            "return": final_return, "steps": last["time/total_timesteps"], "updates": len(rows), "wall": wall}


def last_episodes_mean(log_dir: str, n: int) -> float:
    """Mean return of the n episodes that ended last, over all monitor files (all ranks and envs)."""
    ends = []
    for path in glob.glob(os.path.join(log_dir, "*.monitor.csv")):
        with open(path) as f:
            t_start = json.loads(f.readline()[1:])["t_start"]
            ends += [(t_start + float(row["t"]), float(row["r"])) for row in csv.DictReader(f)]
    ends.sort()
    if len(ends) < n:
        sys.exit(f"bench/mpi.py: only {len(ends)} episodes ended; raise --timesteps or lower --last_episodes")
    return sum(r for _, r in ends[-n:]) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=16384, help="total env steps of each run (all ranks)")
    parser.add_argument("--num_env", type=int, default=4, help="envs per rank (with --same_batch: in all)")
    parser.add_argument("--nsteps", type=int, default=128, help="ppo2 steps per env per rollout")
    parser.add_argument("--lr", type=float, default=1e-3, help="ppo2 learning rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--last_episodes", type=int, default=40, help="episodes in the final-return window")
    parser.add_argument("--same_batch", action="store_true", help="split num_env over the ranks")
    args = parser.parse_args()
    if args.same_batch and args.num_env % 2:
        sys.exit("bench/mpi.py: --same_batch needs an even --num_env")
    print(f"ppo2 CpuBurn-v0 (1 ms/step), {args.timesteps} env steps per run, nsteps {args.nsteps}, "
          f"{'num_env split over the ranks' if args.same_batch else f'{args.num_env} envs per rank'}; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    results = {}
    for ranks in (1, 2):
        num_env = args.num_env // ranks if args.same_batch else args.num_env
        r = results[ranks] = run_ppo2(ranks, num_env, args)
        print(f"{ranks} rank(s) x {num_env} envs: {r['steady']:8.0f} env steps/s steady, {r['overall']:8.0f} overall, "
              f"final return {r['return']:5.1f} (last {args.last_episodes} episodes), {int(r['steps'])} steps in {int(r['updates'])} updates, "
              f"wall {r['wall']:.1f} s")
    ratio = results[2]["steady"] / results[1]["steady"]
    overall = results[2]["overall"] / results[1]["overall"]
    verdict = "PASS" if ratio >= TARGET else "FAIL"
    print(f"ratio 2 ranks / 1 rank: {ratio:.2f}x steady ({overall:.2f}x overall); target >= {TARGET}x {verdict}; "
          f"load average after: {os.getloadavg()[0]:.2f}")
    sys.exit(0 if ratio >= TARGET else 1)


if __name__ == "__main__":
    main()

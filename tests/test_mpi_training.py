"""Distributed training under `mpiexec -n 2`: ppo2, ddpg, sac, td3, her, trpo and a2c stay bit-identical across ranks, the applied
gradient is the mean of the per-rank gradients, only rank 0 writes, SubprocVecEnv combines with MPI."""

import csv
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from common.mpi.mpi_launch import MPI_ENV_PREFIXES
from tests.process_tree import running

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "tests" / "mpi_scripts"
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
pytestmark = [pytest.mark.mpi, pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found next to python "
                                                                          "or on PATH (pip install mpich mpi4py)")]


def launch(cmd: list[str], timeout: float = 120, **extra_env: str) -> subprocess.CompletedProcess:
    """Run an mpiexec command line with the MPI variables of this process removed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(MPI_ENV_PREFIXES)}
    env.update({"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3", **extra_env})
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def train_and_hash(out: Path, *run_args: str) -> list[dict]:
    """Train on 2 ranks with tests/mpi_scripts/train_and_hash.py; the per-rank records."""
    proc = launch([MPIEXEC, "-n", "2", sys.executable, str(SCRIPTS / "train_and_hash.py"), str(out), *run_args])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def episodes(monitor_file: Path) -> list[tuple[float, int]]:
    with open(monitor_file) as f:
        next(f)  # the JSON header line
        return [(float(row["r"]), int(row["l"])) for row in csv.DictReader(f)]


def assert_gone(pids: list[int], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if running(p)]
        time.sleep(0.1)
    assert not alive, f"child processes outlived the MPI job: {alive}"


def test_applied_gradient_is_mean_of_per_rank_gradients():
    proc = launch([MPIEXEC, "-n", "2", sys.executable, str(SCRIPTS / "grad_average.py")])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "grad average ok" in proc.stdout


def test_ppo2_ranks_bit_identical_with_vec_normalize_and_subproc(tmp_path):
    logs = tmp_path / "logs"
    recs = train_and_hash(tmp_path, "--alg=ppo2", "--env=CartPole-v1", "--env_type=mujoco", "--num_env=2",
                          "--vec_env=subproc", "--nsteps=64", "--nminibatches=4", "--noptepochs=2",
                          "--num_timesteps=512", "--seed=3", f"--log_path={logs}", "--log_format=csv",
                          "--num_layers=1", "--num_hidden=16")
    assert [r["size"] for r in recs] == [2, 2]
    assert recs[0]["weights"] == recs[1]["weights"], "ppo2 weights/optimizer state differ across ranks"
    assert recs[0]["vec_normalize"] is not None, "--env_type=mujoco should wrap the env in VecNormalize"
    assert recs[0]["vec_normalize"] == recs[1]["vec_normalize"], "VecNormalize statistics not combined"
    assert [r["num_timesteps"] for r in recs] == [512, 512], "num_timesteps counts the steps of all ranks"
    # each rank stepped its own envs (seed + 10000 * rank): the ranks' episodes differ
    assert episodes(logs / "0.0.monitor.csv") != episodes(logs / "1.0.monitor.csv")
    assert_gone(recs[0]["children"] + recs[1]["children"])


@pytest.mark.parametrize("alg,settings", [
    ("trpo_mpi", ("--timesteps_per_batch=128", "--vf_iters=2", "--vf_batch_size=32", "--max_kl=0.01")),
    ("a2c", ("--nsteps=8",)),
])
def test_trpo_and_a2c_ranks_bit_identical(tmp_path, alg, settings):
    """trpo (through baselines' name trpo_mpi): gradients, Fisher-vector products and line-search losses
    averaged over ranks; a2c: gradients averaged. Each rank steps its own envs."""
    recs = train_and_hash(tmp_path, f"--alg={alg}", "--env=CartPole-v1", "--num_env=2", "--num_timesteps=1024",
                          "--seed=3", f"--log_path={tmp_path / 'logs'}", "--log_format=csv", "--num_hidden=16",
                          *settings)
    assert recs[0]["weights"] == recs[1]["weights"], f"{alg} weights/optimizer state differ across ranks"
    assert [r["num_timesteps"] for r in recs] == [1024, 1024]
    assert episodes(tmp_path / "logs" / "0.0.monitor.csv") != episodes(tmp_path / "logs" / "1.0.monitor.csv")


def test_ddpg_ranks_bit_identical_with_normalisers(tmp_path):
    recs = train_and_hash(tmp_path, "--alg=ddpg", "--env=Pendulum-v1", "--num_timesteps=400", "--seed=5",
                          "--learning_starts=0", "--batch_size=32", "--nb_rollout_steps=50", "--nb_train_steps=4",
                          "--normalize_observations=True", "--normalize_returns=True", "--popart=True",
                          "--noise_type=adaptive-param_0.2,normal_0.1", "--param_noise_adaption_interval=4",
                          "--num_hidden=[16, 16]", f"--log_path={tmp_path / 'logs'}", "--log_format=csv")
    assert recs[0]["weights"] == recs[1]["weights"], "ddpg weights/optimizer/normaliser state differ across ranks"
    assert [r["num_timesteps"] for r in recs] == [400, 400]
    assert episodes(tmp_path / "logs" / "0.0.monitor.csv") != episodes(tmp_path / "logs" / "1.0.monitor.csv")


@pytest.mark.parametrize("alg, extra", [
    ("sac", ("--ent_coef=auto_0.5",)),
    ("td3", ("--noise_type=adaptive-param_0.2,normal_0.1", "--param_noise_adaption_interval=4", "--policy_delay=3")),
    ("tqc", ("--ent_coef=auto_0.5", "--n_quantiles=5", "--top_quantiles_to_drop_per_net=1")),
])
def test_sac_td3_ranks_bit_identical_with_normalisers(tmp_path, alg, extra):
    recs = train_and_hash(tmp_path, f"--alg={alg}", "--env=Pendulum-v1", "--num_timesteps=400", "--seed=5",
                          "--learning_starts=0", "--batch_size=32", "--train_freq=50", "--gradient_steps=4",
                          "--normalize_observations=True", *extra, "--num_hidden=[16, 16]",
                          f"--log_path={tmp_path / 'logs'}", "--log_format=csv")
    assert recs[0]["weights"] == recs[1]["weights"], f"{alg} weights/optimizer/normaliser state differ across ranks"
    assert [r["num_timesteps"] for r in recs] == [400, 400]
    assert episodes(tmp_path / "logs" / "0.0.monitor.csv") != episodes(tmp_path / "logs" / "1.0.monitor.csv")


def test_her_ddpg_ranks_bit_identical(tmp_path):
    """HER on ddpg under MPI (as baselines' her): each rank relabels its own episodes, parameters stay equal."""
    recs = train_and_hash(tmp_path, "--alg=her", "--her_algorithm=ddpg", "--env=envs:BitFlipping-v0",
                          "--num_timesteps=400", "--seed=5", "--learning_starts=0", "--batch_size=32",
                          "--train_freq=50", "--gradient_steps=4", "--num_hidden=[16, 16]",
                          f"--log_path={tmp_path / 'logs'}", "--log_format=csv")
    assert recs[0]["weights"] == recs[1]["weights"], "her weights/optimizer/normaliser state differ across ranks"
    assert [r["num_timesteps"] for r in recs] == [400, 400]


def test_cli_subproc_under_mpi_only_rank0_writes(tmp_path):
    """`mpiexec -n 2 python -m run ... --num_env=2 --vec_env=subproc`, each rank in its own working
    directory with relative paths: rank 1's directory must stay empty of files."""
    dirs = [tmp_path / "rank0", tmp_path / "rank1"]
    for d in dirs:
        d.mkdir()
    args = ["-m", "run", "--alg=ppo2", "--env=CartPole-v1", "--num_env=2", "--vec_env=subproc", "--nsteps=64",
            "--num_timesteps=512", "--seed=0", "--save_interval=256", "--log_path=logs", "--save_path=model.zip",
            "--log_format=csv,log", "--no_progress", "--num_layers=1", "--num_hidden=16"]
    cmd = [MPIEXEC, "-n", "1", "-wdir", str(dirs[0]), sys.executable, *args,
           ":", "-n", "1", "-wdir", str(dirs[1]), sys.executable, *args]
    marker = uuid.uuid4().hex
    proc = launch(cmd, RUNNER_TEST_MARKER=marker)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    logs = dirs[0] / "logs"
    assert (dirs[0] / "model.zip").is_file() and (logs / "config.json").is_file() and (logs / "log.txt").is_file()
    assert sorted(p.name for p in (logs / "checkpoints").iterdir()) == ["0000000256.zip", "0000000512.zip"]
    monitors = sorted(p.name for p in logs.glob("*.monitor.csv"))
    assert monitors == ["0.0.monitor.csv", "0.1.monitor.csv", "1.0.monitor.csv", "1.1.monitor.csv"]
    leaked = [str(p) for p in dirs[1].rglob("*") if p.is_file()]
    assert leaked == [], f"rank 1 wrote files: {leaked}"
    assert not list(logs.glob("*rank*")), "no per-rank logger outputs unless asked"

    with open(logs / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    last = rows[-1]
    assert int(float(last["time/total_timesteps"])) == 512
    # episode means are over both ranks' episodes (weighted by counts), not rank 0's alone
    eps = [e for m in monitors for e in episodes(logs / m)]
    assert float(last["rollout/ep_rew_mean"]) == pytest.approx(np.mean([r for r, _ in eps]), rel=1e-9)
    assert float(last["rollout/ep_len_mean"]) == pytest.approx(np.mean([n for _, n in eps]), rel=1e-9)
    assert_no_process_with_marker(marker)


def assert_no_process_with_marker(marker: str, within: float = 10.0) -> None:
    """No process (rank, forkserver, env worker) started by the job is still alive."""
    needle = f"RUNNER_TEST_MARKER={marker}".encode()
    deadline = time.monotonic() + within
    while True:
        alive = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/environ", "rb") as f:
                        if needle in f.read():
                            alive.append(int(entry))
                except OSError:
                    continue
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not alive, f"processes of the MPI job still alive: {alive}"


def test_deepq_refuses_mpi_with_one_line(tmp_path):
    """deepq raises ConfigError("deepq does not support MPI ...") on every rank: `run: error: ...`, exit 2,
    no hang, nothing trained."""
    start = time.monotonic()
    proc = launch([MPIEXEC, "-n", "2", sys.executable, "-m", "run", "--alg=deepq", "--env=CartPole-v1",
                   "--num_timesteps=5000", f"--log_path={tmp_path}", "--save_path=model.zip"], timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert time.monotonic() - start < 60
    assert "run: error: deepq does not support MPI" in proc.stderr
    assert "Traceback" not in proc.stderr
    progress = tmp_path / "progress.csv"
    assert not progress.exists() or progress.read_text().strip() == "", "deepq trained under MPI"
    assert not (ROOT / "model.zip").exists()


def test_self_play_pool_is_the_same_on_every_rank(tmp_path):
    """`--self_play` under 2 ranks: the same snapshots, weights and prioritised chances on both ranks, each
    rank playing its own games."""
    proc = launch([MPIEXEC, "-n", "2", sys.executable, str(SCRIPTS / "selfplay_pool.py"), str(tmp_path),
                   "--alg=ppo2", "--env=TicTacToe-v0", "--num_env=2", "--vec_env=dummy", "--nsteps=64",
                   "--num_timesteps=1024", "--seed=3", "--self_play", "--snapshot_freq=256",
                   "--opponent_sampling=prioritised", f"--log_path={tmp_path / 'logs'}", "--log_format=csv"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert recs[0] == recs[1]
    assert recs[0]["names"] == ["0", "256", "512", "768", "1024"]
    assert len(set(recs[0]["probs"])) > 1  # the chances moved with the results
    assert episodes(tmp_path / "logs" / "0.0.monitor.csv") != episodes(tmp_path / "logs" / "1.0.monitor.csv")


RANK_FAULT = "--wrapper=tests.mpi_scripts.rank_fault:RankFault(rank=1, fault='{}')"
TINY_PPO2 = ["-m", "run", "--alg=ppo2", "--env=CartPole-v1", "--vec_env=dummy", "--nsteps=64", "--num_layers=1",
             "--num_hidden=16", "--num_timesteps=1e6", "--no_progress", "--log_format=csv"]


def run_faulty_rank(tmp_path: Path, fault: str, timeout_s: str = "600") -> subprocess.CompletedProcess:
    """Tiny ppo2 on 2 ranks whose rank 1 env does ``fault`` at its 40th step (tests/mpi_scripts/rank_fault.py)."""
    return launch([MPIEXEC, "-n", "2", sys.executable, *TINY_PPO2, RANK_FAULT.format(fault),
                   f"--save_path={tmp_path / 'm.zip'}", f"--log_path={tmp_path / 'log'}"], timeout=90,
                  RUNNER_MPI_TIMEOUT=timeout_s)


def test_an_env_failure_on_rank_1_is_named_and_rank_0_saves_and_writes_its_traceback(tmp_path):
    proc = run_faulty_rank(tmp_path, "raise")
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("run:")]
    assert lines == [(f"run: error: rank 1: env 0 raised RuntimeError: rank fault: step 40; model saved to "
                     f"{tmp_path / 'm.zip'} (the env's traceback: {tmp_path / 'log' / 'env_error.txt'})")]
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "m.zip").is_file()
    assert 'rank_fault.py", line' in (tmp_path / "log" / "env_error.txt").read_text()


def test_a_rank_that_stops_answering_is_named_after_the_timeout(tmp_path):
    """Rank 1's env hangs: rank 0 waits RUNNER_MPI_TIMEOUT=3 s in the next collective, then names rank 1,
    saves and ends the job."""
    start = time.monotonic()
    proc = run_faulty_rank(tmp_path, "hang", timeout_s="3")
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("run:")]
    assert lines == [(f"run: error: rank 1 stopped answering: rank 0 waited 3 s for it in a collective "
                     f"(RUNNER_MPI_TIMEOUT=3); model saved to {tmp_path / 'm.zip'}")]
    assert (tmp_path / "m.zip").is_file()
    assert time.monotonic() - start < 60


def test_a_nan_reward_on_rank_1_is_named_and_rank_0_saves(tmp_path):
    proc = run_faulty_rank(tmp_path, "nan_reward")
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("run:")]
    assert len(lines) == 1 and lines[0].startswith("run: error: rank 1: env 0 returned a non-finite reward"), lines
    assert lines[0].endswith(f"; model saved to {tmp_path / 'm.zip'}")

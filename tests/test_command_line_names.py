"""The command line as a new user meets it: counts written 5e5, other libraries' names, ranges, the
algorithm's settings in --help, notes at start (tests/fake_alg.py where no real algorithm is needed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from common.mpi.mpi_launch import MPI_ENV_PREFIXES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = "--alg=tests.fake_alg:learn"
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")


def _cli(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "run", *argv], check=False, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_count_flags_take_5e5_on_the_command_line(tmp_path) -> None:
    proc = _cli(FAKE, "--env=CartPole-v1", "--num_timesteps=64", "--eval_freq=5e5", "--save_video_length=2e2",
                "--play_episodes=1e0", f"--log_path={tmp_path / 'log'}", "--log_format=csv")
    assert proc.returncode == 0, proc.stderr
    proc = _cli(FAKE, "--env=CartPole-v1", "--eval_freq=1.5")
    assert (proc.returncode, proc.stderr) == (2, "run: error: argument --eval_freq: must be a whole number, got 1.5\n")


def test_a_model_of_another_algorithm_is_named_with_its_article(tmp_path) -> None:
    from common.files.model_file import save_model_file

    path = tmp_path / "ppo2.zip"
    save_model_file(str(path), {"algorithm": "ppo2"}, {})
    proc = _cli("--alg=a2c", "--env=CartPole-v1", f"--load_path={path}", "--num_timesteps=0", "--log_format=csv",
                f"--log_path={tmp_path / 'log'}")
    assert proc.returncode == 2 and f"{str(path)!r} holds a ppo2 model, not an a2c model" in proc.stderr, proc.stderr


@pytest.mark.mpi
@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found next to python or on PATH")
def test_the_start_line_under_mpiexec_names_ranks_and_envs_per_rank(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(MPI_ENV_PREFIXES)}
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "run", FAKE, "--env=CartPole-v1", "--num_env=2",
                           "--num_timesteps=64", f"--log_path={tmp_path / 'log'}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False, env={**env, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr
    assert "for 64 timesteps with 2 ranks x 2 envs\n" in proc.stdout


def test_a_budget_that_is_not_whole_rollouts_says_what_is_trained_once(tmp_path) -> None:
    proc = _cli("--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=100", "--num_env=1", "--seed=0",
                f"--log_path={tmp_path / 'log'}")
    assert proc.returncode == 0, proc.stderr
    note = "note: ppo2 trains 96 of the 100 timesteps: whole rollouts of 32 steps (32 per env x 1 env(s))\n"
    assert proc.stdout.count(note) == 1


@pytest.mark.parametrize(("setting", "message"), [
    ("--lr=-1", "--lr must be at least 0 (hyperparams/ppo2.toml [ranges]), got -1"),
    ("--gamma=1.5", "--gamma must be at most 1 (hyperparams/ppo2.toml [ranges]), got 1.5"),
    ("--lr=lin_-3e-4", "--lr must be at least 0 (hyperparams/ppo2.toml [ranges]), got -0.0003"),
    ("--cliprange=0", "--cliprange must be greater than 0 (hyperparams/ppo2.toml [ranges]), got 0"),
])
def test_values_outside_their_range_are_one_line(setting: str, message: str) -> None:
    proc = _cli("--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=64", setting)
    assert (proc.returncode, proc.stderr) == (2, f"run: error: {message}\n")


def test_an_entry_value_that_does_not_fit_the_chosen_network_is_dropped_with_a_note(tmp_path) -> None:
    proc = _cli("--alg=ppo2", "--env=CartPole-v1", "--network=lstm", "--num_timesteps=64", "--seed=0",
                f"--log_path={tmp_path / 'log'}")
    assert proc.returncode == 0, proc.stderr
    assert ("note: hyperparams/ppo2.toml [env.\"CartPole-v1\"] sets value_network='copy', which does not fit "
            "--network=lstm (recurrent); using value_network=None\n") in proc.stdout


def test_other_libraries_names_are_accepted_with_a_note(tmp_path) -> None:
    proc = _cli("--alg=ppo2", "--env=CartPole-v1", "--n-timesteps=64", "--n_envs=2", "--learning_rate=3e-4",
                "--n_steps=16", "--gae_lambda=0.9", f"--log_path={tmp_path / 'log'}")
    assert proc.returncode == 0, proc.stderr
    for note in ("--n-timesteps -> --num_timesteps (rl-baselines3-zoo's name)",
                 "--n_envs -> --num_env (rl-baselines3-zoo's name)", "--learning_rate -> --lr (stable-baselines3's name)",
                 "--n_steps -> --nsteps (stable-baselines3's name)", "--gae_lambda -> --lam (stable-baselines3's name)"):
        assert f"note: {note}\n" in proc.stdout
    assert "for 64 timesteps with 2 env(s)" in proc.stdout


@pytest.mark.parametrize(("argv", "message"), [
    (["--alg=ppo2", "--batch_size=64"], ("algorithm 'ppo2' does not accept --batch_size; stable-baselines3's "
                                        "batch_size is the samples per minibatch: here --minibatch_size=N")),
    (["--alg=ppo2", "--play_episode=3"], "does not accept --play_episode; close matches: --play_episodes (a runner flag)"),
    (["--alg=ppo2", "--lr=1e-3", "--learning_rate=3e-4"], "--lr and --learning_rate name the same setting (lr); give one"),
    (["--alg=ppo2", "--lrr=1e-3"], "does not accept --lrr; close matches: lr\n"),
])
def test_names_that_mean_something_else_are_refused_with_what_to_write(argv: list[str], message: str) -> None:
    proc = _cli(*argv, "--env=CartPole-v1", "--num_timesteps=64")
    assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_help_with_an_algorithm_lists_its_settings_for_the_env(tmp_path) -> None:
    hp = tmp_path / "hp.toml"
    hp.write_text("vf_coef = 0.25\n")
    proc = _cli("--alg=ppo2", "--env=CartPole-v1", f"--hyperparams={hp}", "--help")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "settings of ppo2 on CartPole-v1 (--name=value  [where the value comes from]  type, range):" in lines
    start = lines.index('  --nsteps=32  [hyperparams/ppo2.toml [env."CartPole-v1"]]  int, >= 0')
    assert lines[start + 1].startswith("      steps per env per rollout")
    assert lines[start + 2] == "      also written --n_steps (stable-baselines3), --num_steps (CleanRL)"
    assert f"  --vf_coef=0.25  [{hp}]  float, >= 0" in lines
    assert "  --gamma=0.98  [hyperparams/ppo2.toml [env.\"CartPole-v1\"]]  float, 0 to 1" in lines
    assert "  --minibatch_size=64  [defaults]  int, >= 1" in lines

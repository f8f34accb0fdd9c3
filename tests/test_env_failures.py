"""An env (user code) that fails mid-run, hangs, or a run that gets SIGTERM/SIGHUP/SIGINT: one line, the
model saved, no process left; under `mpiexec -n 2` one message, from rank 0. And the bound on the number
of subprocess workers. The failing envs are envs/faulty.py's ``Faulty-v0``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import gymnasium as gym
import pytest

import run
from common.errors import ConfigError
from common.mpi.mpi_launch import MPI_ENV_PREFIXES
from common.vec_env import EnvWorkerError
from run_util import UsageError
from runner import env_factory
from runner.env_factory import check_worker_count
from tests import fake_alg
from tests.process_tree import descendants, running

ROOT = Path(__file__).resolve().parent.parent
FAKE = ["--alg=tests.fake_alg:learn", "--no_progress", "--log_format=csv"]
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
SUBPROC = ["--num_env=2", "--vec_env=subproc"]
MESSAGES = {
    "raise": "env 0 raised RuntimeError: faulty env: step 40",
    "exit": "env 0 called sys.exit(3)",
    "bad_shape": "env 0 returned an observation of shape (3,) and dtype float32; its observation space holds "
                 "shape (4,) and dtype float32",
    "bad_dtype": "env 0 returned an observation of shape (4,) and dtype <U1; its observation space holds shape "
                 "(4,) and dtype float32",
    "reset_raise": "env 0 raised RuntimeError: faulty env: reset",
}


def _faulty(fault: str, fail_at: int = 40) -> str:
    return f"--env_kwargs={{'fault': '{fault}', 'fail_at': {fail_at}}}"


@pytest.mark.parametrize(("fault", "vec"), [(f, ["--num_env=2"]) for f in MESSAGES] +
                         [("raise", SUBPROC), ("exit", SUBPROC), ("bad_shape", SUBPROC)])
def test_an_env_failure_is_one_line_naming_its_error_and_saves_the_model(tmp_path, fault: str, vec: list) -> None:
    save = tmp_path / "m.zip"
    with pytest.raises(EnvWorkerError) as e:
        run.main([*FAKE, "--env=Faulty-v0", _faulty(fault), *vec, "--num_timesteps=1000", f"--save_path={save}",
                  f"--log_path={tmp_path / 'log'}"])
    line = str(e.value).splitlines()[0]
    assert line.startswith(MESSAGES[fault]), line
    assert line.endswith(f"; model saved to {save}")
    assert fake_alg.load(str(save)).config["total_timesteps"] == 1000
    trace = e.value.worker_traceback  # for env_error.txt: the env's own frames where it raised
    assert trace.startswith("Traceback") and (fault.startswith("bad") or 'faulty.py", line' in trace)


def test_the_command_line_prints_the_env_failure_on_one_line_with_its_traceback_file(tmp_path) -> None:
    save, log = tmp_path / "m.zip", tmp_path / "log"
    proc = subprocess.run([sys.executable, "-m", "run", *FAKE, "--env=Faulty-v0", _faulty("exit"), *SUBPROC,
                           "--num_timesteps=1000", f"--save_path={save}", f"--log_path={log}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr == (f"run: error: env 0 called sys.exit(3) (in its worker process); model saved to {save} "
                           f"(the env's traceback: {log / 'env_error.txt'})\n")
    assert "SystemExit: 3" in (log / "env_error.txt").read_text()


@pytest.mark.parametrize(("name", "status"), [("SIGTERM", 143), ("SIGINT", 130)])  # SIGHUP: test_run.py
def test_a_signal_while_a_subprocess_env_hangs_saves_and_leaves_no_process(tmp_path, name: str, status: int) -> None:
    save, log = tmp_path / "m.zip", tmp_path / "log"
    proc = subprocess.Popen([sys.executable, "-m", "run", *FAKE, "--env=Faulty-v0", _faulty("hang"), *SUBPROC,
                             "--num_timesteps=1000", f"--save_path={save}", f"--log_path={log}"], cwd=ROOT,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (log / "progress.csv").exists() or not (log / "progress.csv").stat().st_size:
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.1)
    time.sleep(0.5)  # step 40 of env 0 hangs: the run waits on its worker
    children = descendants(proc.pid)
    assert children
    proc.send_signal(getattr(signal, name))
    _, err = proc.communicate(timeout=30)
    words = "interrupted" if name == "SIGINT" else f"terminated ({name})"
    assert (proc.returncode, err) == (status, f"run: {words}; model saved to {save}\n")
    assert fake_alg.load(str(save)).config["total_timesteps"] == 1000
    deadline = time.time() + 5
    while [p for p in children if running(p)] and time.time() < deadline:
        time.sleep(0.1)
    assert [p for p in children if running(p)] == []


def test_sigint_in_a_dummy_vec_env_run_saves_like_ctrl_c(tmp_path) -> None:
    save = tmp_path / "m.zip"
    proc = subprocess.run([sys.executable, "-m", "run", *FAKE, "--env=CartPole-v1", "--num_timesteps=1000",
                           f"--save_path={save}", f"--log_path={tmp_path / 'log'}", "--signal_at=32",
                           "--signal_name=SIGINT"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stderr) == (130, f"run: interrupted; model saved to {save}\n")


def test_sigint_after_the_final_save_says_the_model_was_saved(tmp_path) -> None:
    """Ctrl-C while the trained model is played: the line says where the model was saved."""
    save = tmp_path / "m.zip"
    proc = subprocess.Popen([sys.executable, "-m", "run", *FAKE, "--env=CartPole-v1", "--num_timesteps=64",
                             f"--save_path={save}", f"--log_path={tmp_path / 'log'}", "--play", "--no_render",
                             "--play_episodes=100000000"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not save.exists():
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.1)
    time.sleep(0.5)  # playing by now
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert (proc.returncode, err) == (130, f"run: interrupted after training; model saved to {save}\n")


@pytest.mark.mpi
@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found")
def test_sigterm_under_mpiexec_saves_once_with_one_message_from_rank_0(tmp_path) -> None:
    save, log = tmp_path / "m.zip", tmp_path / "log"
    marker = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith(MPI_ENV_PREFIXES)}
    env.update(PYTHONPATH=str(ROOT), RUNNER_TEST_MARKER=marker)
    proc = subprocess.Popen([MPIEXEC, "-n", "2", sys.executable, "-m", "run", *FAKE, "--env=CartPole-v1", *SUBPROC,
                             "--num_timesteps=1e9", f"--save_path={save}", f"--log_path={log}"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (log / "progress.csv").exists() or not (log / "progress.csv").stat().st_size:
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert err == f"run: terminated (SIGTERM); model saved to {save}\n"
    # Every rank exits 143 once rank 0 has saved. MPICH's launcher kills the ranks still running when the
    # first one leaves and ORs the ranks' wait statuses: 143, or 9 when it collected a killed rank's status
    # (2 runs in 40 on a loaded 2-core machine).
    assert proc.returncode in (143, signal.SIGKILL)
    assert fake_alg.load(str(save)).config["total_timesteps"] == int(1e9)
    deadline = time.time() + 10
    while _marked(marker) and time.time() < deadline:
        time.sleep(0.1)
    assert _marked(marker) == []


def _marked(marker: str) -> list[int]:
    """Processes whose environment holds RUNNER_TEST_MARKER=marker (ranks, forkservers, env workers)."""
    needle, found = f"RUNNER_TEST_MARKER={marker}".encode(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if needle in f.read() and running(int(entry)):
                        found.append(int(entry))
            except OSError:
                continue
    return found


def test_too_many_subprocess_workers_are_refused_before_any_starts(monkeypatch) -> None:
    monkeypatch.setenv("RUNNER_MAX_WORKERS", "8")
    check_worker_count(8)
    check_worker_count(64, in_series=8)
    with pytest.raises(ConfigError, match=r"needs 12 worker processes; this machine allows 8 \(RUNNER_MAX_WORKERS\):"
                                          r" add --in_series=2 "):
        check_worker_count(12)
    monkeypatch.delenv("RUNNER_MAX_WORKERS")
    fake_alg.CALLS.clear()
    with pytest.raises(ConfigError, match="--num_env=100000 in subprocesses needs 100000 worker processes"):
        run.main([*FAKE, "--env=CartPole-v1", "--num_env=100000", "--vec_env=subproc", "--in_series=1"])
    assert fake_alg.CALLS == []


class _NotASpaceEnv(gym.Env):
    """An env whose observation_space is not a gymnasium Space."""

    observation_space = "four floats"  # type: ignore[assignment]
    action_space = gym.spaces.Discrete(2)


gym.register("NotASpaceTest-v0", entry_point=_NotASpaceEnv, disable_env_checker=True)
TYPO = "--env_kwargs={'typo': 1}"
BUILD_FAILURES = {
    TYPO: "env 0 raised TypeError: CartPoleEnv.__init__() got an unexpected keyword argument "
                                "'typo'",
    "--wrapper=gymnasium.wrappers:TimeLimit(bogus=1)": "env 0 raised TypeError: TimeLimit.__init__() got an "
                                                       "unexpected keyword argument 'bogus'",
}


@pytest.mark.parametrize(("env", "flag", "message"), [
    *[("CartPole-v1", flag, message) for flag, message in BUILD_FAILURES.items()],
    ("Faulty-v0", "--env_kwargs={'fault': 'nope'}", "env 0 raised ValueError: fault must be one of raise, exit"),
    ("NotASpaceTest-v0", "--vec_env=dummy", "env 0 has an observation_space of type str, not a gymnasium.spaces.Space"),
])
def test_an_env_that_cannot_be_built_in_this_process_is_one_line_with_its_traceback(
        tmp_path, env: str, flag: str, message: str) -> None:
    fake_alg.CALLS.clear()
    with pytest.raises(EnvWorkerError) as e:
        run.main([*FAKE, f"--env={env}", flag, "--num_timesteps=100", f"--log_path={tmp_path}"])
    assert str(e.value).splitlines()[0].startswith(message)
    assert e.value.worker_traceback.startswith("Traceback")
    assert fake_alg.CALLS == []


def test_the_command_line_prints_an_env_build_failure_on_one_line_like_a_worker_failure(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "run", *FAKE, "--env=CartPole-v1", TYPO,
                           "--num_timesteps=100", f"--log_path={tmp_path}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"run: error: {BUILD_FAILURES[TYPO]}")
    assert proc.stderr.endswith(f"(the env's traceback: {tmp_path / 'env_error.txt'})\n")
    assert proc.stderr.count("\n") == 1
    assert "unexpected keyword argument 'typo'" in (tmp_path / "env_error.txt").read_text()


@pytest.mark.parametrize(("vec", "message"), [
    (["--vec_env=subproc", "--in_series=1"], (r"--num_env=40 needs about 160 open files \(4 per worker process\); "
                                             r"this process may open 100 \(ulimit -n\): use fewer envs, --in_series=K")),
    (["--vec_env=dummy"], r"--num_env=40 needs about 40 open files \(1 per monitor file\); this process may open 100"),
])
def test_envs_past_the_open_file_limit_are_refused_before_any_starts(monkeypatch, tmp_path, vec, message) -> None:
    monkeypatch.setenv("RUNNER_MAX_WORKERS", "1000")
    monkeypatch.setattr(env_factory, "open_file_limit", lambda: 100)
    fake_alg.CALLS.clear()
    with pytest.raises(ConfigError, match=message):
        run.main([*FAKE, "--env=CartPole-v1", "--num_env=40", *vec, f"--log_path={tmp_path}"])
    assert fake_alg.CALLS == [] and not list(tmp_path.glob("*.monitor.csv"))


@pytest.mark.skipif(sys.platform in ("darwin", "win32"), reason="windows open there without DISPLAY")
@pytest.mark.parametrize("play", [[], ["--play", "--num_timesteps=0"]])
def test_render_mode_human_without_a_display_is_one_line_before_any_env_starts(monkeypatch, tmp_path, play) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    model = tmp_path / "m.zip"
    run.main([*FAKE, "--env=CartPole-v1", "--num_timesteps=100", f"--save_path={model}"])
    fake_alg.CALLS.clear()
    with pytest.raises(UsageError, match=r"^render_mode='human' opens a window, and there is no display "
                                         r"\(DISPLAY/WAYLAND_DISPLAY unset\): use --play --play_video=FOLDER"):
        run.main([*FAKE, "--env=CartPole-v1", "--num_timesteps=100", "--env_kwargs={'render_mode': 'human'}",
                  f"--load_path={model}", *play])
    assert fake_alg.CALLS == []

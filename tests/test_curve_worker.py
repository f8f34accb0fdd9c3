"""The learning curve's helper process, the runner's use of it, and the runner's exit without teardown."""
import os
import shutil
import subprocess
import sys

import pytest

from common.logs import plot_util
from runner import app as run
from runner import curve_worker

LOGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "logs")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_worker_draws_the_curve(tmp_path):
    shutil.copytree(os.path.join(LOGS, "ppo2-cartpole-seed0"), tmp_path / "run")
    answer = curve_worker.CurveWorker().draw(str(tmp_path / "run"))
    assert answer == {"path": str(tmp_path / "run" / "learning_curve.png")}
    assert plot_util.png_size(answer["path"]) == (800, 500)


def test_worker_answers_none_for_a_folder_without_episodes_and_a_warning_for_an_unwritable_one(tmp_path):
    (tmp_path / "empty").mkdir()
    assert curve_worker.CurveWorker().draw(str(tmp_path / "empty")) == {"path": None}
    shutil.copytree(os.path.join(LOGS, "ppo2-cartpole-seed0"), tmp_path / "run")
    (tmp_path / "run" / "learning_curve.png").mkdir()  # the PNG's name taken by a folder: OSError
    assert "warning" in curve_worker.CurveWorker().draw(str(tmp_path / "run"))


def test_a_dead_worker_makes_the_runner_draw_in_process(tmp_path, monkeypatch):
    shutil.copytree(os.path.join(LOGS, "ppo2-cartpole-seed0"), tmp_path / "run")
    worker = curve_worker.CurveWorker()
    worker._proc.kill()
    worker._proc.wait()
    assert worker.draw(str(tmp_path / "run")) is curve_worker.FAILED
    logged = []
    monkeypatch.setattr(run.logger, "log", lambda *a, **k: logged.append(" ".join(map(str, a))))
    run._write_learning_curve(str(tmp_path / "run"), worker)
    assert (tmp_path / "run" / "learning_curve.png").is_file()
    assert logged == [f"Learning curve: {tmp_path / 'run' / 'learning_curve.png'}"]


def test_closing_an_unused_worker_ends_it():
    worker = curve_worker.CurveWorker()
    proc = worker._proc
    worker.close()
    assert proc.poll() is not None
    assert worker.draw("anywhere") is curve_worker.FAILED


def test_the_runner_starts_a_worker_only_for_a_training_run_outside_mpiexec(monkeypatch):
    started = []
    monkeypatch.setattr(run, "CurveWorker", lambda: started.append(1) or "worker")
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    args = run.common_arg_parser().parse_args(["--num_timesteps=0"])
    assert run._start_curve_worker(args) is None
    args = run.common_arg_parser().parse_args(["--num_timesteps=256"])
    assert run._start_curve_worker(args) == "worker"
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert run._start_curve_worker(args) is None
    assert started == [1]


def test_a_finished_run_exits_0_with_its_files_and_output_whole(tmp_path):
    """``python -m run`` draws its curve through the helper and ends without the interpreter's teardown: the
    log files, the model and stdout (a pipe) must still be complete."""
    log, model = tmp_path / "log", tmp_path / "model.zip"
    proc = subprocess.run(
        [sys.executable, "-m", "run", "--alg=tests.fake_alg:learn", "--env=CartPole-v1", "--num_env=2",
         "--num_timesteps=2000", f"--log_path={log}", f"--save_path={model}", "--no_progress",
         "--log_format=stdout,csv,log,json"],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"Learning curve: {log / 'learning_curve.png'}" in proc.stdout
    assert (log / "log.txt").read_text().rstrip().splitlines()[-1] == f"Learning curve: {log / 'learning_curve.png'}"
    assert model.is_file() and (log / "learning_curve.png").is_file()
    csv_lines = (log / "progress.csv").read_text().splitlines()
    json_lines = (log / "progress.json").read_text().splitlines()
    assert len(csv_lines) >= 2 and len(json_lines) == len(csv_lines) - 1


def test_main_from_python_draws_in_process(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "CurveWorker", lambda: pytest.fail("no helper for main([...]) from Python"))
    run.main(["--alg=tests.fake_alg:learn", "--env=CartPole-v1", "--num_env=2", "--num_timesteps=2000",
              f"--log_path={tmp_path / 'log'}", "--no_progress"])
    assert (tmp_path / "log" / "learning_curve.png").is_file()

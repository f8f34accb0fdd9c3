"""I/O that fails under a run: a closed stdout, `| head`, a full disk (a real small tmpfs where the
machine allows one, else fault-injection doubles), an over-long --save_path: training goes on, the model
is saved somewhere and one line says where. Also checkpoints (rotation, failed writes) and stale temp files."""

from __future__ import annotations

import csv
import errno
import os
import shutil
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest

import run
from algos import training
from common.files.model_file import save_model_file
from common.logs import logger
from common.logs.log_formats import OutputFormat
from common.wrappers.monitor import Monitor
from run_util import UsageError
from runner.saving import SaveError
from tests import fake_alg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = ["--alg=tests.fake_alg:learn", "--env=CartPole-v1", "--no_progress"]


def _enospc(*_args: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


class _FullDisk(OutputFormat):
    """An output whose writes fail as on a full disk."""

    writekvs = writeseq = staticmethod(_enospc)

    def where(self) -> str:
        return "the full disk"


class _Counting(OutputFormat):
    def __init__(self) -> None:
        self.dumps = 0

    def writekvs(self, kvs: dict) -> None:
        self.dumps += 1


def test_an_output_that_fails_is_dropped_with_one_line_and_the_others_go_on(capsys) -> None:
    counting = _Counting()
    log = logger.Logger(None, [_FullDisk(), counting])
    for i in range(3):
        log.logkv("x", i)
        log.dumpkvs()
        log.log("text")
    assert counting.dumps == 3 and len(log.output_formats) == 1
    assert capsys.readouterr().err == ("run: logging to the full disk failed (No space left on device); "
                                       "training goes on without it\n")


def test_a_monitor_file_that_cannot_be_written_stops_alone(tmp_path, capsys) -> None:
    env = Monitor(gym.make("CartPole-v1", max_episode_steps=3), str(tmp_path / "0"))
    writer = env.results_writer
    writer._file = open("/dev/full", "w")  # noqa: SIM115 - every flush fails with ENOSPC
    writer._writer = csv.DictWriter(writer._file, fieldnames=writer._writer.fieldnames)
    env.reset(seed=0)
    episodes = 0
    while episodes < 3:
        _, _, term, trunc, info = env.step(0)
        if term or trunc:
            episodes += "episode" in info
            env.reset()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not written (No space left on device); the env goes on without it" in err
    env.close()


def test_an_over_long_save_path_is_refused_before_training(tmp_path) -> None:
    fake_alg.CALLS.clear()
    with pytest.raises(UsageError, match=r"cannot write a file of that name \(File name too long\)"):
        run.main([*FAKE, f"--save_path={tmp_path / ('a' * 300)}.zip", f"--log_path={tmp_path / 'log'}"])
    assert fake_alg.CALLS == [] and not os.listdir(tmp_path)


def _fail_saves_to(monkeypatch, *paths: str) -> None:
    """FakeModel.save fails with ENOSPC for ``paths`` (the fault-injection double of a full disk)."""
    real = fake_alg.FakeModel.save

    def save(model: fake_alg.FakeModel, path: str) -> None:
        if os.path.abspath(path) in paths:
            _enospc()
        real(model, path)

    monkeypatch.setattr(fake_alg.FakeModel, "save", save)


def test_a_final_save_that_fails_goes_to_the_log_folder_and_says_where(tmp_path, monkeypatch) -> None:
    save, log = str(tmp_path / "out" / "m.zip"), tmp_path / "log"
    _fail_saves_to(monkeypatch, save)
    with pytest.raises(SaveError) as e:
        run.main([*FAKE, "--num_timesteps=64", f"--save_path={save}", f"--log_path={log}", "--log_format=csv"])
    assert str(e.value) == (f"cannot write --save_path {save} (No space left on device); model saved to "
                            f"{log / 'm.zip'} instead")
    assert fake_alg.load(str(log / "m.zip")).config["total_timesteps"] == 64


def test_when_the_log_folder_is_full_too_the_model_goes_to_the_temp_folder(tmp_path, monkeypatch) -> None:
    save, log, temp = str(tmp_path / "m.zip"), tmp_path / "log", tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr("tempfile.tempdir", None)
    _fail_saves_to(monkeypatch, save, str(log / "m.zip"))
    with pytest.raises(SaveError, match="model saved to .* instead"):
        run.main([*FAKE, "--num_timesteps=64", f"--save_path={save}", f"--log_path={log}", "--log_format=csv"])
    assert os.listdir(temp) == [f"m-{os.getpid()}.zip"]


def _cli(*argv: str, **kwargs: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "run", *FAKE, *argv], cwd=ROOT, text=True, **kwargs)


def test_stdout_piped_into_head_keeps_training_and_saves(tmp_path) -> None:
    save = tmp_path / "m.zip"
    proc = _cli("--num_timesteps=20000", f"--save_path={save}", f"--log_path={tmp_path / 'log'}",
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    assert err == "run: logging to stdout failed (Broken pipe); training goes on without it\n"
    assert fake_alg.load(str(save)).config["total_timesteps"] == 20000
    assert len((tmp_path / "log" / "progress.csv").read_text().splitlines()) > 20  # the other outputs went on


def test_play_piped_into_head_stops_with_one_line(tmp_path) -> None:
    save = tmp_path / "m.zip"
    run.main([*FAKE, "--num_timesteps=64", f"--save_path={save}", f"--log_path={tmp_path / 'log'}",
              "--log_format=csv"])
    proc = _cli("--num_timesteps=0", f"--load_path={save}", "--play", "--play_episodes=100000", "--no_render",
                f"--log_path={tmp_path / 'play'}", "--log_format=csv", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert (proc.wait(timeout=60), err) == (141, "run: stopped: stdout was closed (Broken pipe)\n")


def test_closed_stdout_trains_and_saves_quietly(tmp_path) -> None:
    save = tmp_path / "m.zip"
    command = [sys.executable, "-m", "run", *FAKE, "--num_timesteps=2000", f"--save_path={save}",
               f"--log_path={tmp_path / 'log'}"]
    proc = subprocess.run(["sh", "-c", '"$@" >&-', "sh", *command], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert fake_alg.load(str(save)).config["total_timesteps"] == 2000
    assert "Saved model to" in (tmp_path / "log" / "log.txt").read_text()  # fd 1 was never a log file


FULL_DISK = """
mount -t tmpfs -o size=48k tmpfs "$1"
shift
"$@"
"""


def _private_mount_or_skip() -> None:
    """Skip unless this process may mount a tmpfs in a private namespace (``unshare -rm``)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True,
                                                         check=False).returncode != 0:
        pytest.skip("this machine does not allow a private mount namespace (unshare -rm)")


def test_a_real_full_disk_under_the_log_folder(tmp_path) -> None:
    """A 48 KiB tmpfs holds the log folder and --save_path: logging, monitor files and the save fail."""
    disk, temp = tmp_path / "disk", tmp_path / "temp"
    disk.mkdir()
    temp.mkdir()
    _private_mount_or_skip()
    command = [sys.executable, "-m", "run", *FAKE, "--num_timesteps=40000", f"--log_path={disk / 'log'}",
               f"--save_path={disk / 'm.zip'}", "--log_format=log,csv"]
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", FULL_DISK, "sh", str(disk), *command], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "TMPDIR": str(temp)})
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert any(line.endswith("progress.csv failed (No space left on device); training goes on without it")
               for line in lines)
    fallback = temp / next(p for p in os.listdir(temp) if p.startswith("m-"))
    assert lines[-1] == (f"run: error: cannot write --save_path {disk / 'm.zip'} (No space left on device); "
                         f"model saved to {fallback} instead")
    assert fake_alg.load(str(fallback)).config["total_timesteps"] == 40000


def test_a_log_folder_full_from_the_start_is_one_line_before_training(tmp_path) -> None:
    _private_mount_or_skip()
    disk = tmp_path / "disk"
    disk.mkdir()
    script = FULL_DISK.replace("shift", 'mkdir "$1/log"; head -c 65536 /dev/zero > "$1/fill" 2>/dev/null\nshift')
    command = [sys.executable, "-m", "run", *FAKE, "--num_timesteps=400", f"--log_path={disk / 'log'}",
               "--log_format=log,csv"]
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", str(disk), *command], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert (proc.returncode, proc.stderr) == (2, (f"run: error: --log_path {disk / 'log'}: cannot write there "
                                                 "(No space left on device)\n"))


class _Saving:
    def __init__(self, fail: bool = False) -> None:
        self.fail, self.saved = fail, []

    def save(self, path: str) -> None:
        if self.fail:
            _enospc()
        save_model_file(path, {"algorithm": "none"}, {"w": np.zeros(2)})


def test_checkpoints_keep_the_newest_and_a_failed_one_does_not_stop_training(csv_log_dir, capsys) -> None:
    training.set_run_context(keep_checkpoints=2)
    try:
        run_ = training.TrainingRun(_Saving(), env=None, rank_seed=0, save_interval=10)
        for t in range(0, 50, 10):
            run_.periodic(t, t + 10)
        assert sorted(os.listdir(csv_log_dir / "checkpoints")) == ["0000000040.zip", "0000000050.zip"]
        failing = training.TrainingRun(_Saving(fail=True), env=None, rank_seed=0, save_interval=10)
        failing.periodic(50, 60)
        failing.periodic(60, 70)
    finally:
        training.set_run_context()
    err = capsys.readouterr().err
    assert err == (f"run: checkpoint {csv_log_dir / 'checkpoints' / '0000000060.zip'} not written "
                   "(No space left on device); training goes on\n")


def test_the_next_save_removes_temp_files_of_dead_writers_only(tmp_path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    old = time.time() - 3600
    names = {"dead": f".tmp-{dead.pid}-abc.zip", "alive": f".tmp-{os.getpid()}-abc.zip",
             "fresh": f".tmp-{dead.pid}-new.zip", "other": "keep.zip"}
    for key, name in names.items():
        (tmp_path / name).write_bytes(b"partial")
        if key != "fresh":
            os.utime(tmp_path / name, (old, old))
    save_model_file(str(tmp_path / "m.zip"), {"algorithm": "none"}, {"w": np.zeros(2)})
    assert sorted(os.listdir(tmp_path)) == sorted([names["alive"], names["fresh"], "keep.zip", "m.zip"])


@pytest.mark.parametrize("flag", ["--log_path", "--save_path", "--play_video"])
def test_a_path_that_is_not_utf8_is_one_line(tmp_path, flag: str) -> None:
    path = os.fsdecode(os.fsencode(str(tmp_path)) + b"/x\xff")  # as Python decodes a non-UTF-8 argv
    with pytest.raises(UsageError, match=rf"^{flag} .*/x\\xff: the name is not valid UTF-8; give a UTF-8 name$"):
        run.main([*FAKE, "--num_timesteps=100", f"{flag}={path}"])
    assert os.listdir(tmp_path) == []


def test_the_command_line_refuses_a_non_utf8_log_path_with_exit_2(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "run", *FAKE, "--num_timesteps=100",
                           b"--log_path=" + os.fsencode(str(tmp_path)) + b"/x\xff"], cwd=ROOT, capture_output=True,
                          timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr == b"run: error: --log_path " + os.fsencode(str(tmp_path)) + \
        b"/x\\xff: the name is not valid UTF-8; give a UTF-8 name\n"

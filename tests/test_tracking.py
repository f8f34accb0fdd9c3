"""--track: a W&B run (offline) with every logged key, the configuration, the learning curve and videos."""

import glob
import os
import struct
import subprocess
import sys

import pytest

import run
from common import tracking
from common.files.checkpoint import checkpoints
from common.tracking import WandbOutput, parse_tags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(*args, extra_env=None):
    """``python -m run ARGS`` headless, W&B offline (never a server)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY") and not k.startswith("WANDB")}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true", **(extra_env or {}))
    return subprocess.run([sys.executable, "-m", "run", "--no_progress", *args], check=False, cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)


def wandb_records(path):
    """The protobuf records of a ``run-*.wandb`` file (a LevelDB log after a 7-byte W&B header)."""
    from wandb.proto import wandb_internal_pb2

    data, pos, buf, block = open(path, "rb").read(), 7, b"", 32768  # noqa: SIM115
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = struct.unpack("<HB", data[pos + 4:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        buf = chunk if kind in (1, 2) else buf + chunk  # FULL/FIRST start a record, MIDDLE/LAST continue it
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(buf)
            yield record


def test_tracked_run_offline_holds_keys_config_curve_and_videos(tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    log = tmp_path / "log"
    proc = run_cli("--alg=tests.fake_alg:learn", "--env=CartPole-v1", "--num_env=2", "--num_timesteps=192",
                   f"--log_path={log}", "--log_format=csv", "--save_video_interval=48", "--save_video_length=5",
                   "--track", "--wandb_project=tests", "--wandb_group=cartpole", "--wandb_tags=smoke,fake",
                   "--play", "--play_episodes=1", f"--play_video={tmp_path / 'play'}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (path,) = glob.glob(str(log / "wandb" / "offline-run-*" / "run-*.wandb"))
    history, config, runs = set(), set(), []
    for record in wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            history |= {item.key or "/".join(item.nested_key) for item in record.history.item}
        elif kind == "run":
            runs.append(record.run)
            config |= {item.key for item in record.run.config.update}
        elif kind == "config":
            config |= {item.key for item in record.config.update}
    with open(log / "progress.csv", encoding="utf-8") as f:
        logged = set(f.readline().strip().split(","))
    assert {"time/total_timesteps", "rollout/ep_rew_mean"} <= logged <= history  # every logged key
    assert {"alg", "env_id", "learn_kwargs", "hyperparameters", "runner_args"} <= config
    assert [(r.project, r.run_group, list(r.tags)) for r in runs] == [("tests", "cartpole", ["smoke", "fake"])]
    assert "media/learning_curve/path" in history
    assert {"media/videos/rl-video-step-0-to-step-4/path", "media/videos/CartPole-v1-episode-1/path"} <= history


def test_track_without_wandb_is_one_line_before_training(tmp_path):
    hide = tmp_path / "hide"
    (hide / "wandb").mkdir(parents=True)
    (hide / "wandb" / "__init__.py").write_text("raise ImportError('No module named wandb')\n")
    log = tmp_path / "log"
    proc = run_cli("--alg=tests.fake_alg:learn", "--env=CartPole-v1", "--num_timesteps=64", f"--log_path={log}",
                   "--track", extra_env={"PYTHONPATH": f"{hide}{os.pathsep}{REPO}"})
    assert proc.returncode == 2
    assert proc.stderr == "run: error: --track needs the wandb package: pip install -r requirements-track.txt\n"
    assert not (log / "progress.csv").exists()


class FakeRun:
    """A W&B run that keeps what it is sent: ``step`` is the last step logged (a resumed run starts at its own)."""

    def __init__(self, run_id: str = "run", step: int = 0):
        self.id, self.step, self.calls, self.finished = run_id, step, [], False

    def log(self, values, step=None):
        self.calls.append((values, step))
        self.step = self.step if step is None else step

    def finish(self):
        self.finished = True


class FakeWandb:
    """The wandb module as the tracker uses it, keeping each ``init``'s arguments; a run id given again
    continues that run at its last step, as W&B's server does."""

    class errors:
        Error = RuntimeError

    def __init__(self):
        self.inits, self.runs = [], []

    def Settings(self, **kwargs):
        return kwargs

    def init(self, **kwargs):
        self.inits.append(kwargs)
        earlier = [r for r in self.runs if r.id == kwargs.get("id")]
        self.runs.append(FakeRun(kwargs.get("id") or f"run{len(self.inits)}", earlier[-1].step if earlier else 0))
        return self.runs[-1]

    def Image(self, path):
        return path

    def Video(self, path, format=None):
        return path


def test_output_sends_numbers_at_the_step_of_the_dump():
    run = FakeRun()
    WandbOutput(run).writekvs({"time/total_timesteps": 640, "rollout/ep_rew_mean": 12.5, "note": "text",
                               "flag": True})
    assert run.calls == [({"time/total_timesteps": 640, "rollout/ep_rew_mean": 12.5}, 640)]
    assert parse_tags(" a, ,b ") == ["a", "b"] and parse_tags(None) == []


def test_resume_continues_the_tracked_wandb_run(tmp_path, monkeypatch):
    fake = FakeWandb()
    monkeypatch.setattr(tracking, "_wandb", lambda: fake)
    log = tmp_path / "log"
    run.main(["--alg=ppo2", "--env=IdentityDiscrete-v0", "--nsteps=64", "--num_env=2", "--num_timesteps=512",
              "--checkpoint_freq=256", "--num_hidden=16", "--log_interval=1", "--log_format=csv", "--no_progress",
              "--seed=1", f"--log_path={log}", "--track", "--wandb_project=tests"])
    assert (log / "wandb_run_id.txt").read_text() == "run1\n"
    (_, newest), _ = checkpoints(str(log / "resume"), 0)
    os.unlink(newest)  # the run as if stopped after its checkpoint at 256 env steps
    run.main([f"--resume={log}"])
    assert [(i.get("id"), i.get("resume"), i["project"]) for i in fake.inits] == [(None, None, "tests"),
                                                                        ("run1", "allow", "tests")]
    first, resumed = fake.runs
    assert first.finished and resumed.finished and resumed.id == "run1"
    assert [step for _, step in first.calls if step] == [128, 256, 384, 512]
    assert [step for _, step in resumed.calls if step] == [512]  # 384 is in W&B already


def test_a_resumed_log_folder_whose_run_id_file_is_not_an_id_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(tracking, "_wandb", FakeWandb)
    (tmp_path / "wandb_run_id.txt").write_text("../x y\n")
    with pytest.raises(tracking.TrackingError, match=r"wandb_run_id.txt does not hold a W&B run id; delete it"):
        tracking.Tracker({}, str(tmp_path), "tests", resume=True)

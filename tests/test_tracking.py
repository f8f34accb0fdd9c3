"""--track: a W&B run (offline) with every logged key, the configuration, the learning curve and videos."""

import glob
import os
import struct
import subprocess
import sys

import pytest

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


def test_output_sends_numbers_at_the_step_of_the_dump():
    class FakeRun:
        def __init__(self):
            self.calls = []

        def log(self, values, step=None):
            self.calls.append((values, step))

    run = FakeRun()
    WandbOutput(run).writekvs({"time/total_timesteps": 640, "rollout/ep_rew_mean": 12.5, "note": "text",
                               "flag": True})
    assert run.calls == [({"time/total_timesteps": 640, "rollout/ep_rew_mean": 12.5}, 640)]
    assert parse_tags(" a, ,b ") == ["a", "b"] and parse_tags(None) == []

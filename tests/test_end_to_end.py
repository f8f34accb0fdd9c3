"""The user's path through the real command line: train with ppo2, save, then --play from the file."""

import glob
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPISODE_LINE = re.compile(r"^episode (\d+): return (-?[\d.]+) length (\d+)$", re.MULTILINE)


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """``python -m run ARGS`` from the repo root, headless, as a user types it."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    return subprocess.run([sys.executable, "-m", "run", "--no_progress", *args], check=False, cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def cartpole_model(tmp_path_factory) -> str:
    """A short ppo2 CartPole run saved with --save_path (shared by the tests of this module)."""
    folder = tmp_path_factory.mktemp("e2e")
    model = str(folder / "cartpole.zip")
    proc = run_cli("--alg=ppo2", "--env=CartPole-v1", "--num_env=2", "--num_timesteps=2048", "--seed=0",
                   "--nsteps=256", f"--save_path={model}", f"--log_path={folder / 'log'}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert os.path.isfile(model)
    assert os.path.isfile(folder / "log" / "progress.csv")
    assert os.path.isfile(folder / "log" / "learning_curve.png")
    return model


def test_play_from_file_prints_each_episode_and_records_matching_video(cartpole_model, tmp_path) -> None:
    videos = tmp_path / "videos"
    proc = run_cli("--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=0", f"--load_path={cartpole_model}",
                   "--play", "--play_episodes=3", f"--play_video={videos}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    episodes = EPISODE_LINE.findall(proc.stdout)
    assert [int(n) for n, _, _ in episodes] == [1, 2, 3], proc.stdout
    for _, ret, length in episodes:  # CartPole pays 1 per step: return == length, in raw units
        assert float(ret) == pytest.approx(float(length))
    import imageio_ffmpeg

    for k, (_, _, length) in enumerate(episodes, 1):  # one file per episode: the reset frame, one per step
        path = str(videos / f"CartPole-v1-episode-{k}.mp4")
        assert os.path.getsize(path) > 0
        assert imageio_ffmpeg.count_frames_and_secs(path)[0] == int(length) + 1
    assert len(glob.glob(str(videos / "*.mp4"))) == 3


def test_play_with_a_model_for_another_env_is_one_line_and_exit_2(cartpole_model) -> None:
    proc = run_cli("--alg=ppo2", "--env=Acrobot-v1", "--num_timesteps=0", f"--load_path={cartpole_model}",
                   "--play", "--play_episodes=1")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("run: error:") and "space" in lines[-1], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_a_corrupt_model_file_is_one_line_and_exit_2(tmp_path) -> None:
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"this is not a model file")
    proc = run_cli("--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=0", f"--load_path={bad}", "--play")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("run: error:")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("argv", "message"), [
    (["--alg=deepq", "--env=Pendulum-v1"], "Discrete action space"),
    (["--alg=ddpg", "--env=CartPole-v1"], "Box"),
    (["--alg=ppo2", "--env=CartPole-v1", "--lr=fast"], "fast"),
])
def test_settings_an_algorithm_refuses_are_one_line_and_exit_2(argv: list[str], message: str) -> None:
    proc = run_cli(*argv, "--num_timesteps=1000")
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("run: error:") and message in last, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr

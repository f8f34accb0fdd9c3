"""VecVideoRecorder: mp4 files named by their steps, frame counts, content order, partial videos."""

import os
import subprocess
import sys
import textwrap
import time
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest

from common.vec_env import DummyVecEnv
from common.vec_env.vec_video_recorder import Mp4Writer, VecVideoRecorder

imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ShadeEnv(gym.Env):
    """Renders a flat grey 48x64 image whose brightness is 10 + 3 * (steps since reset)."""

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 25}

    def __init__(self, render_mode=None, fail_at=None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Discrete(1)
        self.action_space = gym.spaces.Discrete(2)
        self.fail_at = fail_at
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action):
        self.t += 1
        if self.t == self.fail_at:
            raise RuntimeError("boom")
        return 0, 0.0, False, False, {}

    def render(self):
        return np.full((48, 64, 3), min(255, 10 + 3 * self.t), dtype=np.uint8)


def make_venv(n=2, render_mode="rgb_array", fail_at=None):
    return DummyVecEnv([lambda: ShadeEnv(render_mode, fail_at) for _ in range(n)])


def read_video(path):
    """(frames as an (N, H, W, 3) uint8 array, metadata) of an mp4 file."""
    gen = imageio_ffmpeg.read_frames(path)
    meta = gen.__next__()
    w, h = meta["size"]
    frames = [np.frombuffer(f, dtype=np.uint8).reshape(h, w, 3) for f in gen]
    return np.stack(frames), meta


def run_steps(rec, n):
    for _ in range(n):
        rec.step(np.zeros(rec.num_envs, dtype=np.int64))


def test_videos_start_at_triggered_steps_with_matching_frame_counts(tmp_path):
    rec = VecVideoRecorder(make_venv(), str(tmp_path / "videos"), lambda s: s % 20 == 0, video_length=7)
    rec.reset()
    run_steps(rec, 45)
    assert rec.recording
    rec.close()  # cuts the third video short after 6 frames (steps 40..45)
    names = sorted(os.listdir(tmp_path / "videos"))
    assert names == ["rl-video-step-0-to-step-6.mp4", "rl-video-step-20-to-step-26.mp4",
                     "rl-video-step-40-to-step-45.mp4"]
    assert [os.path.basename(p) for p in rec.videos] == [names[0], names[1], names[2]]
    for name, expected in zip(names, (7, 7, 6)):
        path = str(tmp_path / "videos" / name)
        assert os.path.getsize(path) > 0
        assert imageio_ffmpeg.count_frames_and_secs(path)[0] == expected


def test_frames_are_the_tiled_renders_in_step_order(tmp_path):
    rec = VecVideoRecorder(make_venv(), str(tmp_path), lambda s: s == 3, video_length=10, name_prefix="v")
    rec.reset()
    run_steps(rec, 20)
    rec.close()
    frames, meta = read_video(str(tmp_path / "v-step-3-to-step-12.mp4"))
    assert meta["size"] == (64, 96)  # two 48x64 envs tiled in a 2x1 grid
    assert meta["fps"] == 25  # from the env's metadata["render_fps"]
    assert frames.shape == (10, 96, 64, 3)
    shades = frames.reshape(10, -1).mean(axis=1)
    np.testing.assert_allclose(shades, 10 + 3 * np.arange(3, 13), atol=1.0)


def test_exception_in_step_finishes_the_partial_video(tmp_path):
    rec = VecVideoRecorder(make_venv(fail_at=10), str(tmp_path), lambda s: s == 5, video_length=20)
    rec.reset()
    with pytest.raises(RuntimeError, match="boom"):
        run_steps(rec, 12)
    assert not rec.recording
    path = str(tmp_path / "rl-video-step-5-to-step-9.mp4")
    assert rec.videos == [path]
    assert imageio_ffmpeg.count_frames_and_secs(path)[0] == 5
    rec.close()


def test_reset_while_recording_closes_the_video(tmp_path):
    rec = VecVideoRecorder(make_venv(n=1), str(tmp_path), lambda s: s in (0, 4), video_length=100)
    rec.reset()
    run_steps(rec, 3)
    rec.reset()  # step 3: the trigger says no, so no new video
    assert not rec.recording
    run_steps(rec, 1)  # step 4 starts a video
    assert rec.recording
    rec.close()
    assert sorted(os.listdir(tmp_path)) == ["rl-video-step-0-to-step-3.mp4", "rl-video-step-4-to-step-4.mp4"]


@pytest.mark.parametrize(
    ("ending", "name"),
    [
        ("pass", "rl-video-step-0-to-step-8.mp4"),  # atexit hook finishes and renames the file
        ("os.kill(os.getpid(), signal.SIGKILL)", "rl-video-step-0-to-step-49.mp4"),  # ffmpeg sees EOF
    ],
)
def test_partial_video_survives_process_end_without_close(tmp_path, ending, name):
    script = textwrap.dedent(f"""
        import os, signal, sys
        import numpy as np
        sys.path.insert(0, {os.path.join(REPO, "tests")!r})
        from test_video import make_venv
        from common.vec_env.vec_video_recorder import VecVideoRecorder
        rec = VecVideoRecorder(make_venv(), {str(tmp_path)!r}, lambda s: s == 0, video_length=50)
        rec.reset()
        for _ in range(8):
            rec.step(np.zeros(2, dtype=np.int64))
        {ending}
    """)
    subprocess.run([sys.executable, "-c", script], check=False, cwd=REPO, timeout=120,
                   env={**os.environ, "PYTHONPATH": REPO})
    path = str(tmp_path / name)
    deadline = time.monotonic() + 20  # after a SIGKILL the orphaned ffmpeg finishes on its own
    while True:
        try:
            assert imageio_ffmpeg.count_frames_and_secs(path)[0] == 9
            break
        except (RuntimeError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    assert os.listdir(tmp_path) == [name]


def test_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        VecVideoRecorder(make_venv(render_mode=None), str(tmp_path), lambda s: True)
    with pytest.raises(TypeError, match="record_video_trigger must be a callable"):
        VecVideoRecorder(make_venv(), str(tmp_path), 100)
    with pytest.raises(ValueError, match="video_length must be at least 1"):
        VecVideoRecorder(make_venv(), str(tmp_path), lambda s: True, video_length=0)
    writer = Mp4Writer(str(tmp_path / "x.mp4"), fps=10)
    with pytest.raises(TypeError, match="uint8"):
        writer.write(np.zeros((4, 4, 3), dtype=np.float32))
    writer.write(np.zeros((5, 7), dtype=np.uint8))  # grey, odd size: padded to 6x8 RGB
    with pytest.raises(ValueError, match="same size"):
        writer.write(np.zeros((8, 8, 3), dtype=np.uint8))
    writer.close()
    writer.close()
    assert writer.frames == 1 and writer.shape == (6, 8, 3)
    assert imageio_ffmpeg.count_frames_and_secs(writer.path)[0] == 1


def test_recording_through_subprocess_workers(tmp_path):
    from common.vec_env import SubprocVecEnv

    rec = VecVideoRecorder(SubprocVecEnv([lambda: ShadeEnv("rgb_array") for _ in range(3)]), str(tmp_path),
                           lambda s: s == 2, video_length=5)
    rec.reset()
    run_steps(rec, 10)
    rec.close()
    frames, _ = read_video(str(tmp_path / "rl-video-step-2-to-step-6.mp4"))
    assert frames.shape == (5, 96, 128, 3)  # three 48x64 envs tiled in a 2x2 grid, one black cell
    np.testing.assert_allclose(frames[:, :48, :64].reshape(5, -1).mean(axis=1), 10 + 3 * np.arange(2, 7), atol=1.0)


def test_run_save_video_interval_writes_videos_in_the_log_folder(tmp_path):
    import run

    log = tmp_path / "log"
    run.main(["--alg=tests.fake_alg:learn", "--env=CartPole-v1", "--num_env=2", "--num_timesteps=200",
              "--save_video_interval=50", "--save_video_length=10", f"--log_path={log}", "--no_progress"])
    videos = sorted(os.listdir(log / "videos"), key=lambda n: int(n.split("-")[3]))
    assert videos[:2] == ["rl-video-step-0-to-step-9.mp4", "rl-video-step-50-to-step-59.mp4"]
    for name in videos:  # every file holds as many frames as its name says
        start, end = int(name.split("-")[3]), int(name.split("-")[6].removesuffix(".mp4"))
        path = str(log / "videos" / name)
        assert os.path.getsize(path) > 0
        assert imageio_ffmpeg.count_frames_and_secs(path)[0] == end - start + 1

"""VecVideoRecorder: mp4 files named by their steps, frame counts, content order, partial videos."""

import ctypes.util
import os
import re
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
    run_steps(rec, 2)  # step 4 starts a video, step 5 adds a frame
    assert rec.recording
    rec.close()
    assert sorted(os.listdir(tmp_path)) == ["rl-video-step-0-to-step-3.mp4", "rl-video-step-4-to-step-5.mp4"]


def test_close_removes_a_video_holding_only_its_start_frame(tmp_path):
    rec = VecVideoRecorder(make_venv(n=1), str(tmp_path), lambda s: s in (0, 4), video_length=3)
    rec.reset()
    run_steps(rec, 4)  # step 4, the run's last, starts a video: one still frame
    assert rec.recording
    rec.close()
    assert sorted(os.listdir(tmp_path)) == ["rl-video-step-0-to-step-2.mp4"]


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
    run.main(["--alg=tests.fake_alg:learn", "--env=CartPole-v1", "--num_env=2", "--num_timesteps=192",
              "--save_video_interval=48", "--save_video_length=10", f"--log_path={log}", "--no_progress"])
    videos = sorted(os.listdir(log / "videos"), key=lambda n: int(n.split("-")[3]))
    # 96 steps of 2 envs: the trigger at step 96, the last, leaves no one-frame clip
    assert videos == ["rl-video-step-0-to-step-9.mp4", "rl-video-step-48-to-step-57.mp4"]
    for name in videos:  # every file holds as many frames as its name says
        start, end = int(name.split("-")[3]), int(name.split("-")[6].removesuffix(".mp4"))
        path = str(log / "videos" / name)
        assert os.path.getsize(path) > 0
        assert imageio_ffmpeg.count_frames_and_secs(path)[0] == end - start + 1


class EndingShadeEnv(ShadeEnv):
    """ShadeEnv whose episodes end after ``length`` steps."""

    def __init__(self, render_mode="rgb_array", length=4):
        super().__init__(render_mode)
        self.length = length

    def step(self, action):
        obs, reward, _, truncated, info = super().step(action)
        return obs, reward, self.t >= self.length, truncated, info


def test_episode_video_writes_one_whole_episode_per_file(tmp_path):
    from common.vec_env.vec_video_recorder import EpisodeVideo

    venv = DummyVecEnv([lambda: EpisodeVideo(EndingShadeEnv(), str(tmp_path), name_prefix="Shade-v0")])
    venv.reset()
    run_steps(venv, 10)  # episodes of 4 steps: two whole ones, the third cut after 2 steps by close()
    venv.close()
    assert sorted(os.listdir(tmp_path)) == [f"Shade-v0-episode-{k}.mp4" for k in (1, 2, 3)]
    for k, steps in ((1, 4), (2, 4), (3, 2)):
        frames, meta = read_video(str(tmp_path / f"Shade-v0-episode-{k}.mp4"))
        assert meta["size"] == (64, 48) and frames.shape[0] == steps + 1  # the reset frame, then one per step
        np.testing.assert_allclose(frames.reshape(steps + 1, -1).mean(axis=1), 10 + 3 * np.arange(steps + 1),
                                   atol=1.0)


def run_cli(*args, mujoco_gl=None):
    """``python -m run ARGS`` as a user types it on a machine without a display (``MUJOCO_GL`` as given)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL", "PYOPENGL_PLATFORM", "SDL_VIDEODRIVER")}
    if mujoco_gl:
        env["MUJOCO_GL"] = mujoco_gl
    return subprocess.run([sys.executable, "-m", "run", "--no_progress", *args], check=False, cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)


def test_play_video_headless_writes_one_file_per_episode_without_stray_lines(tmp_path):
    videos = tmp_path / "videos"
    proc = run_cli("--alg=tests.fake_alg:learn", "--env=CartPole-v1", "--num_timesteps=16", "--log_format=csv",
                   f"--log_path={tmp_path / 'log'}", "--play", "--play_episodes=3", f"--play_video={videos}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr == ""  # no "error: XDG_RUNTIME_DIR is invalid" from SDL
    lengths = [int(n) for n in re.findall(r"^episode \d+: return \S+ length (\d+)$", proc.stdout, re.MULTILINE)]
    assert len(lengths) == 3
    assert sorted(os.listdir(videos)) == [f"CartPole-v1-episode-{k}.mp4" for k in (1, 2, 3)]
    for k, length in enumerate(lengths, 1):
        path = str(videos / f"CartPole-v1-episode-{k}.mp4")
        assert os.path.getsize(path) > 1000
        assert imageio_ffmpeg.count_frames_and_secs(path)[0] == length + 1


def test_mujoco_play_video_without_a_display(tmp_path):
    pytest.importorskip("mujoco")
    videos = tmp_path / "videos"
    proc = run_cli("--alg=tests.fake_alg:learn", "--env=HalfCheetah-v5", "--num_timesteps=16", "--log_format=csv",
                   f"--log_path={tmp_path / 'log'}", "--env_kwargs={'max_episode_steps': 5, 'width': 64, 'height': 48}",
                   "--play", "--play_episodes=2", f"--play_video={videos}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(os.listdir(videos)) == ["HalfCheetah-v5-episode-1.mp4", "HalfCheetah-v5-episode-2.mp4"]
    for name in os.listdir(videos):
        frames, meta = read_video(str(videos / name))
        assert meta["size"] == (64, 48) and frames.shape[0] == 6
        assert frames.std() > 5  # a rendered scene, not a blank frame


def test_mujoco_video_without_an_opengl_backend_is_one_line_before_training(tmp_path):
    pytest.importorskip("mujoco")
    if ctypes.util.find_library("OSMesa"):
        pytest.skip("OSMesa is installed here: MUJOCO_GL=osmesa would work")
    log = tmp_path / "log"
    proc = run_cli("--alg=tests.fake_alg:learn", "--env=HalfCheetah-v5", "--num_timesteps=1000",
                   "--save_video_interval=100", f"--log_path={log}", mujoco_gl="osmesa")
    assert proc.returncode == 2
    assert proc.stderr.startswith("run: error: cannot render HalfCheetah-v5 for video: MUJOCO_GL=osmesa")
    assert "apt-get install libosmesa6" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (log / "progress.csv").exists()

"""Record the tiled frames of a vec env to mp4 files while it is stepped.

The encoder is the ffmpeg binary shipped inside the ``imageio-ffmpeg`` wheel (no system
ffmpeg needed). It runs as a separate process fed through a pipe; when the pipe closes
(``close()``, an exception, interpreter exit, even a killed Python process) ffmpeg finishes
the file, so a partially recorded video stays playable.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from common.vec_env.base import VecEnv, VecEnvWrapper, VecObs, VecStepReturn

DEFAULT_FPS = 30
FFMPEG_CLOSE_TIMEOUT_S = 60.0


def _as_rgb24(frame: Any) -> np.ndarray:
    """A contiguous (H, W, 3) uint8 frame with even H and W (padded with black)."""
    if frame is None:
        raise ValueError("render('rgb_array') returned no frame; make the envs with render_mode='rgb_array'")
    img = np.asarray(frame)
    if img.dtype != np.uint8:
        raise TypeError(f"video frames must be uint8 RGB images, got dtype {img.dtype}")
    if img.ndim == 2:
        img = img[:, :, None]
    if img.ndim != 3 or img.shape[2] not in (1, 3, 4):
        raise ValueError(f"video frames must have shape (H, W, 1|3|4), got {img.shape}")
    if img.shape[2] == 1:
        img = np.repeat(img, 3, axis=2)
    elif img.shape[2] == 4:
        img = img[:, :, :3]
    h, w = img.shape[:2]
    if h % 2 or w % 2:  # yuv420p (the widely playable pixel format) needs even sizes
        img = np.pad(img, ((0, h % 2), (0, w % 2), (0, 0)))
    return np.ascontiguousarray(img)


class Mp4Writer:
    """Frames in, one H.264 mp4 file out; the size is fixed by the first frame.

    Args:
        path: the mp4 file to write.
        fps: frames per second of the video.
    """

    def __init__(self, path: str, fps: float) -> None:
        self.path = path
        self.fps = fps
        self.frames = 0
        self.shape: tuple[int, ...] | None = None
        self._gen: Any = None

    def write(self, frame: Any) -> None:
        """Append one RGB frame."""
        img = _as_rgb24(frame)
        if self._gen is None:
            self._open(img.shape)
        elif img.shape != self.shape:
            raise ValueError(f"frame of shape {img.shape} after frames of shape {self.shape}; "
                             "all frames of a video must have the same size")
        self._gen.send(img)
        self.frames += 1

    def _open(self, shape: tuple[int, ...]) -> None:
        try:
            import imageio_ffmpeg
        except ImportError:
            raise ImportError("writing videos needs the imageio-ffmpeg package: "
                              "pip install imageio-ffmpeg") from None
        height, width = shape[:2]
        gen = imageio_ffmpeg.write_frames(
            self.path, (width, height), fps=self.fps, codec="libx264", quality=5,
            macro_block_size=2, ffmpeg_log_level="error", ffmpeg_timeout=FFMPEG_CLOSE_TIMEOUT_S,
            output_params=["-preset", "veryfast", "-threads", "1"],
        )
        gen.send(None)  # start ffmpeg
        self._gen, self.shape = gen, shape

    def close(self) -> None:
        """Finish the file (waits for ffmpeg); calling it again does nothing."""
        gen, self._gen = self._gen, None
        if gen is not None:
            gen.close()


class VecVideoRecorder(VecEnvWrapper):
    """Write mp4 videos of the tiled envs, starting at the steps a trigger selects.

    Steps are counted in calls of ``step_wait`` (one step of every env); ``reset()`` is step 0
    of the recorder's lifetime. When ``record_video_trigger(step)`` is true and no video is
    being recorded, a video starts with the frame after that step and holds ``video_length``
    frames: ``<directory>/<name_prefix>-step-<start>-to-step-<end>.mp4``, ``end`` inclusive, so
    a complete video has ``end - start + 1`` frames. A video cut short by ``reset()``,
    ``close()`` or an exception is finished and renamed to the last step it holds; one that
    ``close()`` cuts after its first frame (a trigger at the last step of a run) is removed.

    Args:
        venv: the vec env; its envs must be made with ``render_mode="rgb_array"``.
        directory: folder of the videos (created).
        record_video_trigger: step -> whether to start a video there, e.g.
            ``lambda step: step % 10000 == 0``.
        video_length: frames per video.
        name_prefix: start of the file names.
        fps: frames per second; default: the envs' ``metadata["render_fps"]``, else 30.
    """

    def __init__(self, venv: VecEnv, directory: str, record_video_trigger: Callable[[int], bool],
                 video_length: int = 200, name_prefix: str = "rl-video", fps: float | None = None) -> None:
        super().__init__(venv)
        if not callable(record_video_trigger):
            raise TypeError(f"record_video_trigger must be a callable step -> bool, "
                            f"got {type(record_video_trigger).__name__}")
        if int(video_length) < 1:
            raise ValueError(f"video_length must be at least 1 frame, got {video_length}")
        modes = venv.get_attr("render_mode")
        if any(m != "rgb_array" for m in modes):
            raise ValueError(f"VecVideoRecorder needs envs made with render_mode='rgb_array', got {modes}; "
                             "pass render_mode='rgb_array' when making the envs")
        self.directory = os.path.abspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.record_video_trigger = record_video_trigger
        self.video_length = int(video_length)
        self.name_prefix = name_prefix
        self.fps = float(fps) if fps is not None else self._env_fps()
        self.step_id = 0
        self.videos: list[str] = []  # finished video files, in order
        self._writer: Mp4Writer | None = None
        self._start_step = 0

    def _env_fps(self) -> float:
        metadata = self.venv.get_attr("metadata", indices=[0])[0] or {}
        fps = metadata.get("render_fps")
        return float(fps) if fps else float(DEFAULT_FPS)

    @property
    def recording(self) -> bool:
        """Whether a video is being written."""
        return self._writer is not None

    def _path(self, start: int, end: int) -> str:
        return os.path.join(self.directory, f"{self.name_prefix}-step-{start}-to-step-{end}.mp4")

    def reset(self) -> VecObs:
        """Reset the envs; an unfinished video is closed, a new one starts if the trigger says so."""
        self.close_video_recorder()
        obs = self.venv.reset()
        self._maybe_start()
        return obs

    def step_wait(self) -> VecStepReturn:
        """Step the envs, then record the frame after the step or start a video."""
        try:
            result = self.venv.step_wait()
        except BaseException:
            self.close_video_recorder()
            raise
        self.step_id += 1
        if self._writer is not None:
            self._capture()
            if self._writer.frames >= self.video_length:
                self.close_video_recorder()
        else:
            self._maybe_start()
        return result

    def _maybe_start(self) -> None:
        if not self.record_video_trigger(self.step_id):
            return
        self._start_step = self.step_id
        self._writer = Mp4Writer(self._path(self.step_id, self.step_id + self.video_length - 1), self.fps)
        atexit.register(self.close_video_recorder)
        self._capture()
        if self._writer is not None and self._writer.frames >= self.video_length:
            self.close_video_recorder()

    def _capture(self) -> None:
        assert self._writer is not None
        try:
            self._writer.write(self.venv.render("rgb_array"))
        except BaseException:
            self.close_video_recorder()
            raise

    def close_video_recorder(self) -> None:
        """Finish the current video, if any (renamed to its last step when cut short)."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        atexit.unregister(self.close_video_recorder)
        writer.close()
        if not os.path.exists(writer.path):
            return  # the first frame failed before ffmpeg started
        if writer.frames == 0:
            os.remove(writer.path)  # ffmpeg started but got no frame: the file is not a video
            return
        path = writer.path
        if writer.frames < self.video_length:
            path = self._path(self._start_step, self._start_step + writer.frames - 1)
            os.replace(writer.path, path)
        self.videos.append(path)

    def close(self) -> None:
        """Finish the current video (removed when it holds one frame of several) and close the wrapped envs."""
        self._drop_still_frame()
        self.close_video_recorder()
        super().close()

    def _drop_still_frame(self) -> None:
        """Forget a video that holds only the frame of its start step: no step will follow it."""
        writer = self._writer
        if writer is not None and writer.frames == 1 and self.video_length > 1:
            self._writer = None
            atexit.unregister(self.close_video_recorder)
            writer.close()
            if os.path.exists(writer.path):
                os.remove(writer.path)


class EpisodeVideo(gym.Wrapper):
    """Write each episode of one env to its own mp4 file, ``<folder>/<name_prefix>-episode-<k>.mp4`` (k = 1, 2, ...).

    A file holds the frame after ``reset()`` and one after every step, the last step included: an episode of
    L steps has L + 1 frames. An episode that never took a step (the reset after the last one) writes no
    file; one cut short by ``close()`` keeps the frames it has. Put it inside the vec env (a ``--wrapper``
    spec) so the episode's last frame is rendered before the vec env resets the env.

    Args:
        env: an env made with ``render_mode="rgb_array"``.
        folder: folder of the videos (created).
        name_prefix: start of the file names (the env id).
        fps: frames per second; default: the env's ``metadata["render_fps"]``, else 30.
    """

    def __init__(self, env: gym.Env, folder: str, name_prefix: str = "episode", fps: float | None = None) -> None:
        super().__init__(env)
        if env.render_mode != "rgb_array":
            raise ValueError(f"EpisodeVideo needs an env made with render_mode='rgb_array', got {env.render_mode!r}")
        self.folder = os.path.abspath(folder)
        os.makedirs(self.folder, exist_ok=True)
        self.name_prefix = name_prefix.replace("/", "-").replace(":", "-")
        self.fps = float(fps or (env.metadata or {}).get("render_fps") or DEFAULT_FPS)
        self.episodes = 0
        self.videos: list[str] = []  # finished video files, in order
        self._writer: Mp4Writer | None = None
        self._first: Any = None  # the reset frame, written when the episode takes its first step

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the env; the episode before (if any) is finished and its frame after reset kept."""
        self._finish()
        result = self.env.reset(**kwargs)
        self._first = self.env.render()
        return result

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step the env and record the frame after the step; the episode's file ends with its last step."""
        result = self.env.step(action)
        if self._writer is None and self._first is not None:
            self.episodes += 1
            self._writer = Mp4Writer(os.path.join(self.folder, f"{self.name_prefix}-episode-{self.episodes}.mp4"),
                                     self.fps)
            atexit.register(self._finish)
            self._writer.write(self._first)
            self._first = None
        if self._writer is not None:
            self._writer.write(self.env.render())
            if result[2] or result[3]:
                self._finish()
        return result

    def _finish(self) -> None:
        writer, self._writer = self._writer, None
        self._first = None
        if writer is not None:
            atexit.unregister(self._finish)
            writer.close()
            self.videos.append(writer.path)

    def close(self) -> None:
        """Finish the current video and close the env."""
        self._finish()
        super().close()

"""DeepMind-style Atari wrappers (gymnasium 1.x API), as baselines applies them.

``make_atari`` builds a NoFrameskip env with no-op resets and frame skipping; ``wrap_deepmind`` adds
episodic life, fire-on-reset, 84x84 grayscale frames, reward clipping and (optionally) frame stacking.
Resizing uses OpenCV when installed and a numpy area average otherwise. The envs themselves come from
ale-py (``pip install ale-py``), which registers them with gymnasium.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class NoopResetEnv(gym.Wrapper):
    """Do a random number (1..noop_max) of no-op actions on reset."""

    def __init__(self, env: gym.Env, noop_max: int = 30) -> None:
        super().__init__(env)
        self.noop_max = noop_max
        meanings = getattr(env.unwrapped, "get_action_meanings", lambda: ["NOOP"])()
        if meanings[0] != "NOOP":
            raise ValueError(f"NoopResetEnv needs action 0 to be NOOP, got {meanings[0]}")

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        for _ in range(int(self.np_random.integers(1, self.noop_max + 1))):
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


class FireResetEnv(gym.Wrapper):
    """Press FIRE after reset for games that wait for it."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        self.env.reset(**kwargs)
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


class EpisodicLifeEnv(gym.Wrapper):
    """End an episode on life loss (for learning); reset only when the game is really over."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.was_real_done = True

    def _lives(self) -> int:
        ale = getattr(self.env.unwrapped, "ale", None)
        return int(ale.lives()) if ale is not None else 0

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.was_real_done = terminated or truncated
        lives = self._lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        if self.was_real_done:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.lives = self._lives()
        return obs, info


class MaxAndSkipEnv(gym.Wrapper):
    """Repeat the action ``skip`` times; observe the max of the last two frames."""

    def __init__(self, env: gym.Env, skip: int = 4) -> None:
        super().__init__(env)
        self.skip = skip
        self._buf = np.zeros((2, *env.observation_space.shape), dtype=env.observation_space.dtype)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        total, terminated, truncated, info = 0.0, False, False, {}
        for i in range(self.skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            if i >= self.skip - 2:
                self._buf[i - (self.skip - 2)] = obs
            total += float(reward)
            if terminated or truncated:
                break
        return self._buf.max(axis=0), total, terminated, truncated, info


class ClipRewardEnv(gym.RewardWrapper):
    """Rewards become their sign (-1, 0, +1)."""

    def reward(self, reward: float) -> float:
        return float(np.sign(reward))


try:  # optional: resizing with OpenCV when installed (looked up once, not per frame)
    import cv2
except ImportError:
    cv2 = None

GRAY_WEIGHTS = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def _resize_area(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize an (H, W) image by block averaging (nearest rows/cols first when not divisible)."""
    h, w = frame.shape
    fy, fx = max(h // height, 1), max(w // width, 1)
    rows = (np.arange(height * fy) * h // (height * fy))
    cols = (np.arange(width * fx) * w // (width * fx))
    grid = frame[rows][:, cols].astype(np.float32)
    if fy == 2 and fx == 1:  # Atari's 210x160 -> 84x84: the same sums as the mean below, in one add
        return (grid[0::2] + grid[1::2]) / np.float32(2)
    return grid.reshape(height, fy, width, fx).mean(axis=(1, 3))


class WarpFrame(gym.ObservationWrapper):
    """Grayscale (optional) and resize frames to ``width`` x ``height``; obs shape (H, W, 1 or 3) uint8."""

    def __init__(self, env: gym.Env, width: int = 84, height: int = 84, grayscale: bool = True) -> None:
        super().__init__(env)
        self.width, self.height, self.grayscale = width, height, grayscale
        channels = 1 if grayscale else 3
        self.observation_space = gym.spaces.Box(0, 255, (height, width, channels), dtype=np.uint8)

    def observation(self, frame: np.ndarray) -> np.ndarray:
        frame = np.asarray(frame)
        if self.grayscale and frame.ndim == 3:
            frame = frame.astype(np.float32) @ GRAY_WEIGHTS
        planes = [frame] if frame.ndim == 2 else [frame[..., c] for c in range(frame.shape[-1])]
        out = []
        for plane in planes:
            if cv2 is not None:
                out.append(cv2.resize(plane.astype(np.float32), (self.width, self.height),
                                      interpolation=cv2.INTER_AREA))
            else:
                out.append(_resize_area(plane, self.height, self.width))
        return np.clip(np.stack(out, axis=-1).round(), 0, 255).astype(np.uint8)


class ScaledFloatFrame(gym.ObservationWrapper):
    """uint8 frames to float32 in [0, 1]."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = gym.spaces.Box(0.0, 1.0, env.observation_space.shape, dtype=np.float32)

    def observation(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs, dtype=np.float32) / 255.0


class FrameStack(gym.ObservationWrapper):
    """Stack the last ``k`` frames on the channel axis (for single envs, e.g. deepq)."""

    def __init__(self, env: gym.Env, k: int) -> None:
        super().__init__(env)
        shp = env.observation_space.shape
        self.k = k
        self.frames = np.zeros((*shp[:-1], shp[-1] * k), dtype=env.observation_space.dtype)
        low = np.repeat(env.observation_space.low, k, axis=-1)
        high = np.repeat(env.observation_space.high, k, axis=-1)
        self.observation_space = gym.spaces.Box(low, high, dtype=env.observation_space.dtype)
        self._c = shp[-1]

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self.frames[...] = np.tile(obs, self.k)
        return self.frames.copy(), info

    def observation(self, obs: np.ndarray) -> np.ndarray:
        self.frames = np.roll(self.frames, -self._c, axis=-1)
        self.frames[..., -self._c:] = obs
        return self.frames.copy()


def register_atari_envs() -> bool:
    """Register the ALE envs with gymnasium (in this process) when ale-py is installed; False if it is not.

    The emulator's banner ("A.L.E: Arcade Learning Environment ...", "[Powered by Stella]"), printed on
    stderr by every env made, is silenced unless the run is verbose (``--verbose``, ``RUNNER_VERBOSE``).
    """
    try:
        import ale_py
    except ImportError:
        return False
    from common.process.startup import verbose_requested

    if not verbose_requested():
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    gym.register_envs(ale_py)
    return True


def make_atari(env_id: str, max_episode_steps: int | None = None, **make_kwargs: Any) -> gym.Env:
    """A NoFrameskip Atari env with no-op resets and frame skipping (4) with max-pooling.

    ``ALE/<Game>-v5`` ids are made with ``frameskip=1`` so the skipping happens here.
    """
    if env_id.startswith("ALE/"):
        make_kwargs.setdefault("frameskip", 1)
        make_kwargs.setdefault("repeat_action_probability", 0.0)
    elif "NoFrameskip" not in env_id:
        raise ValueError(f"make_atari needs a NoFrameskip or ALE/ env id, got {env_id!r}")
    if env_id not in gym.registry:  # a fresh SubprocVecEnv worker has not registered the ALE envs yet
        register_atari_envs()
    env = gym.make(env_id, max_episode_steps=max_episode_steps, **make_kwargs)
    env = NoopResetEnv(env, noop_max=30)
    return MaxAndSkipEnv(env, skip=4)


def wrap_deepmind(env: gym.Env, episode_life: bool = True, clip_rewards: bool = True,
                  frame_stack: bool = False, scale: bool = False) -> gym.Env:
    """The DeepMind preprocessing on top of ``make_atari`` (and a Monitor, in make_env)."""
    if episode_life:
        env = EpisodicLifeEnv(env)
    meanings = getattr(env.unwrapped, "get_action_meanings", list)()
    if "FIRE" in meanings:
        env = FireResetEnv(env)
    env = WarpFrame(env)
    if scale:
        env = ScaledFloatFrame(env)
    if clip_rewards:
        env = ClipRewardEnv(env)
    if frame_stack:
        env = FrameStack(env, 4)
    return env

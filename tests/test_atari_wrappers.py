"""WarpFrame's numpy path (no OpenCV) gives the frames of the plain algorithm: gray, pick rows and columns,
mean over 2x1 blocks, round."""
import gymnasium as gym
import numpy as np
import pytest

from common.wrappers import atari_wrappers
from common.wrappers.atari_wrappers import WarpFrame


def _whole_frame_then_resize(frame: np.ndarray) -> np.ndarray:
    gray = frame.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    rows, cols = np.arange(168) * 210 // 168, np.arange(84) * 160 // 84
    small = gray[rows][:, cols].reshape(84, 2, 84, 1).mean(axis=(1, 3))
    return np.clip(small.round(), 0, 255).astype(np.uint8)[..., None]


@pytest.mark.parametrize("game", ["PongNoFrameskip-v4", "BreakoutNoFrameskip-v4"])
def test_numpy_path_gives_the_frames_of_the_plain_algorithm(game: str, monkeypatch) -> None:
    import ale_py

    monkeypatch.setattr(atari_wrappers, "cv2", None)
    gym.register_envs(ale_py)
    env = gym.make(game)
    env.reset(seed=0)
    warp = WarpFrame(env)
    rng = np.random.default_rng(0)
    for _ in range(150):
        frame, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        out = warp.observation(frame)
        assert out.shape == (84, 84, 1) and out.dtype == np.uint8
        np.testing.assert_array_equal(out, _whole_frame_then_resize(frame))
        if terminated or truncated:
            env.reset()
    env.close()


def test_resize_area_fast_case_equals_the_general_mean() -> None:
    frame = np.random.default_rng(1).uniform(0, 255, (210, 160)).astype(np.float32)
    rows, cols = np.arange(168) * 210 // 168, np.arange(84) * 160 // 84
    np.testing.assert_array_equal(atari_wrappers._resize_area(frame, 84, 84),
                                  frame[rows][:, cols].reshape(84, 2, 84, 1).mean(axis=(1, 3)))

"""Uniform replay buffer: wrap-around, n-env insertion, terminal handling."""

import numpy as np
import pytest

from common.buffers.replay import ReplayBuffer, terminal_aware_next


def _step_batch(start: int, n_envs: int) -> tuple[np.ndarray, ...]:
    obs = np.arange(start, start + n_envs, dtype=np.float32)[:, None].repeat(2, axis=1)
    actions = np.arange(start, start + n_envs) % 3
    rewards = np.full(n_envs, float(start), dtype=np.float32)
    return obs, actions, rewards, obs + 0.5, np.zeros(n_envs, dtype=np.float32)


def test_n_env_insertion_keeps_rows_in_order() -> None:
    buf = ReplayBuffer(10, obs_shape=(2,))
    idx = buf.add(*_step_batch(0, 4))
    np.testing.assert_array_equal(idx, [0, 1, 2, 3])
    assert len(buf) == 4
    np.testing.assert_array_equal(buf.obs[:4, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(buf.next_obs[:4, 1], [0.5, 1.5, 2.5, 3.5])
    np.testing.assert_array_equal(buf.actions[:4], [0, 1, 2, 0])


def test_wrap_around_overwrites_oldest_rows() -> None:
    buf = ReplayBuffer(5, obs_shape=(2,))
    buf.add(*_step_batch(0, 4))
    idx = buf.add(*_step_batch(10, 3))
    np.testing.assert_array_equal(idx, [4, 0, 1])
    assert len(buf) == 5
    np.testing.assert_array_equal(buf.obs[:, 0], [11, 12, 2, 3, 10])
    np.testing.assert_array_equal(buf.rewards, [10, 10, 0, 0, 10])


def test_sampling_only_returns_filled_rows() -> None:
    buf = ReplayBuffer(100, obs_shape=(2,))
    buf.add(*_step_batch(0, 3))
    batch = buf.sample((4, 50), np.random.default_rng(0))
    assert batch["obs"].shape == (4, 50, 2)
    assert set(np.unique(batch["obs"][..., 0])) <= {0.0, 1.0, 2.0}


def test_empty_and_oversized_adds_are_refused() -> None:
    buf = ReplayBuffer(2, obs_shape=(2,))
    with pytest.raises(ValueError, match="empty"):
        buf.sample(1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="capacity"):
        buf.add(*_step_batch(0, 3))
    with pytest.raises(ValueError, match="positive"):
        ReplayBuffer(0, obs_shape=(1,))


def test_terminal_observation_replaces_reset_obs_and_truncation_is_not_terminal() -> None:
    new_obs = np.array([[1.0], [2.0], [3.0]], dtype=np.float32)
    dones = np.array([False, True, True])
    infos = [
        {},
        {"terminal_observation": np.array([20.0]), "TimeLimit.truncated": True},
        {"terminal_observation": np.array([30.0]), "TimeLimit.truncated": False},
    ]
    next_obs, terminated = terminal_aware_next(new_obs, dones, infos)
    np.testing.assert_array_equal(next_obs[:, 0], [1.0, 20.0, 30.0])
    np.testing.assert_array_equal(terminated, [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(new_obs[:, 0], [1.0, 2.0, 3.0])  # caller's array untouched

    buf = ReplayBuffer(8, obs_shape=(1,))
    buf.add_vec_step(new_obs - 1, np.zeros(3, dtype=np.int64), np.ones(3, np.float32), new_obs, dones, infos)
    np.testing.assert_array_equal(buf.next_obs[:3, 0], [1.0, 20.0, 30.0])
    np.testing.assert_array_equal(buf.dones[:3], [0.0, 0.0, 1.0])

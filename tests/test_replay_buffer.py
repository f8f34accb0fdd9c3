"""Uniform replay buffer: wrap-around, n-env insertion, terminal handling."""

import numpy as np
import pytest
from gymnasium import spaces

from common import memory
from common.buffers.dict_replay import DictReplayBuffer
from common.buffers.her import HerReplayBuffer
from common.buffers.prioritized import PrioritizedReplayBuffer
from common.buffers.replay import ReplayBuffer, terminal_aware_next
from common.errors import ConfigError


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


def _goal_space(dim: int) -> spaces.Dict:
    box = spaces.Box(-1.0, 1.0, (dim,), np.float32)
    return spaces.Dict({"achieved_goal": box, "desired_goal": box, "observation": box})


BUFFERS = {  # each: size -> a buffer of 10,000-float observations (80 kB per transition and more)
    "replay": lambda size: ReplayBuffer(size, (10_000,), (2,), np.float32, np.float32),
    "prioritized": lambda size: PrioritizedReplayBuffer(size, (10_000,), (2,), np.float32, np.float32),
    "dict": lambda size: DictReplayBuffer(size, _goal_space(3_334), 2, 2),
    "her": lambda size: HerReplayBuffer(size, _goal_space(3_334), 2, 2, lambda a, d, info: np.zeros(len(a))),
}


@pytest.mark.parametrize("kind", BUFFERS)
def test_a_buffer_larger_than_the_available_memory_is_one_line_before_allocating(kind: str, monkeypatch) -> None:
    monkeypatch.setattr(memory, "available_memory", lambda: 2**30)  # 1 GiB
    with pytest.raises(ConfigError, match=r"^the replay buffer needs 74\.\d GiB for buffer_size=1000000 \(\d+ bytes "
                                          r"per row\); this machine has 1\.0 GiB of memory available: lower "
                                          r"buffer_size \(at most 13\d\d\d rows fit\)$"):
        BUFFERS[kind](1_000_000)
    assert len(BUFFERS[kind](1000)) == 0


def test_a_buffer_no_machine_holds_is_refused_without_a_memory_error() -> None:
    with pytest.raises(ConfigError, match="lower buffer_size"):
        ReplayBuffer(10**9, (10_000,), (2,), np.float32, np.float32)

"""runner.env_factory: the wrappers of one env and the seeding and monitoring of a batch of them."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

from runner import env_factory
from runner.env_factory import (
    ClipActionWrapper,
    RewardScaleWrapper,
    auto_in_series,
    make_env,
    make_vec_env,
)


def test_make_env_wraps_monitor_clip_and_scale(tmp_path: os.PathLike) -> None:
    env = make_env("Pendulum-v1", "classic_control", subrank=3, reward_scale=0.1, logger_dir=str(tmp_path))
    assert isinstance(env, RewardScaleWrapper)
    assert isinstance(env.env, ClipActionWrapper)
    assert env.action_space.low[0] == -2.0  # bounds kept, unlike gymnasium's ClipAction
    env.reset(seed=0)
    _, r, *_ = env.step(np.array([100.0], dtype=np.float32))  # clipped to 2
    assert -1.7 < r <= 0  # scaled by 0.1 (Pendulum rewards are in [-16.3, 0])
    env.close()
    assert os.path.exists(os.path.join(tmp_path, "0.3.monitor.csv"))


def test_make_env_flattens_dict_observations() -> None:
    import envs  # noqa: F401

    flat = make_env("DictObs-v0", "envs")
    kept = make_env("DictObs-v0", "envs", flatten_dict_observations=False)
    assert isinstance(flat.observation_space, gym.spaces.Box)
    assert isinstance(kept.observation_space, gym.spaces.Dict)


def test_make_vec_env_seeds_each_env_differently_and_repeatably() -> None:
    def first_obs(seed: int) -> np.ndarray:
        venv = make_vec_env("CartPole-v1", "classic_control", 3, seed, logger_dir="")
        obs = venv.reset()
        venv.close()
        return obs

    a, b, c = first_obs(5), first_obs(5), first_obs(6)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a[0], a[1])
    np.testing.assert_array_equal(a[1], c[0])  # env i gets seed + i


def test_make_vec_env_monitor_returns_in_raw_units(tmp_path: os.PathLike) -> None:
    venv = make_vec_env("CartPole-v1", "classic_control", 1, 0, reward_scale=0.01, logger_dir=str(tmp_path))
    venv.reset()
    for _ in range(600):
        _, rew, done, infos = venv.step(np.array([0]))
        if done[0]:
            break
    venv.close()
    assert rew[0] == pytest.approx(0.01)
    assert infos[0]["episode"]["r"] == infos[0]["episode"]["l"]  # CartPole: +1 a step, unscaled


def test_atari_env_gets_deepmind_wrappers_and_a_frame_stack_in_subprocess_workers() -> None:
    """ale-py registers the ALE envs in the parent only; the workers must register them too."""
    pytest.importorskip("ale_py")
    import run
    from runner.config import resolve
    from runner.envs import build_env

    args, extra = run.parse_args(["--env=PongNoFrameskip-v4", "--num_env=2", "--seed=0", "--vec_env=subproc"])
    config = resolve(args, extra)
    assert (config.env_type, config.network) == ("atari", "cnn")
    venv = build_env(config)
    try:
        obs = venv.reset()
        assert obs.shape == (2, 84, 84, 4) and obs.dtype == np.uint8
        obs, rewards, _, _ = venv.step(np.zeros(2, dtype=np.int64))
        assert obs.shape == (2, 84, 84, 4) and rewards.shape == (2,)
        assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0}  # clipped rewards
    finally:
        venv.close()


def test_mujoco_warnings_write_no_log_file_into_the_working_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = make_env("Ant-v5", "mujoco")  # its XML uses the deprecated 'settotalmass'
    env.reset(seed=0)
    env.close()
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


@pytest.mark.parametrize(("cores", "local_ranks", "num_env", "expected"), [
    (2, None, 8, 4),   # 8 Pong envs on 2 cores: 2 workers of 4
    (16, None, 8, 1),  # enough cores: one worker per env, as before
    (3, None, 8, 4),   # 8 // 3 is no divisor: the fewest envs per worker within 3 workers
    (4, "2", 8, 4),    # two MPI ranks on the host share its 4 cores
    (2, None, 7, 1),   # a prime count: one worker would leave a core idle, so one per env as before
    (4, None, 6, 2),   # 3 workers of 2 on 4 cores
    (2, None, 1, 1),
])
def test_auto_in_series_keeps_one_worker_per_core(monkeypatch, cores, local_ranks, num_env, expected) -> None:
    monkeypatch.setattr(env_factory, "available_cpus", lambda: cores)
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_SIZE", raising=False)
    if local_ranks is None:
        monkeypatch.delenv("MPI_LOCALNRANKS", raising=False)
    else:
        monkeypatch.setenv("MPI_LOCALNRANKS", local_ranks)
    k = auto_in_series(num_env)
    assert k == expected
    assert num_env % k == 0


def test_subproc_vec_env_without_in_series_uses_the_cores(monkeypatch) -> None:
    monkeypatch.setattr(env_factory, "available_cpus", lambda: 2)
    monkeypatch.delenv("MPI_LOCALNRANKS", raising=False)
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_SIZE", raising=False)
    venv = make_vec_env("CartPole-v1", "classic_control", 4, seed=0, vec_env_kind="subproc", logger_dir="")
    try:
        assert venv._in_series == 2
        obs = venv.reset()
        assert obs.shape == (4, 4)
    finally:
        venv.close()

import json

import gymnasium as gym
import numpy as np
import pytest

from common.wrappers.monitor import (
    LoadMonitorResultsError,
    Monitor,
    get_monitor_files,
    load_results,
)


def test_episode_info_and_csv(tmp_path):
    env = Monitor(gym.make("CartPole-v1"), str(tmp_path / "0"))
    env.reset(seed=0)
    env.action_space.seed(0)
    lengths, returns = [], []
    length = 0
    while len(lengths) < 3:
        _, _, term, trunc, info = env.step(env.action_space.sample())
        length += 1
        if term or trunc:
            assert info["episode"]["l"] == length
            assert info["episode"]["r"] == pytest.approx(float(length))  # CartPole: +1 per step
            lengths.append(length)
            returns.append(info["episode"]["r"])
            length = 0
            env.reset()
        else:
            assert "episode" not in info
    env.close()
    files = get_monitor_files(str(tmp_path))
    assert files == [str(tmp_path / "0.monitor.csv")]
    with open(files[0]) as f:
        header = json.loads(f.readline()[1:])
        assert header["env_id"] == "CartPole-v1"
        assert f.readline().strip() == "r,l,t"
    res = load_results(str(tmp_path))
    np.testing.assert_array_equal(res["l"], lengths)
    np.testing.assert_allclose(res["r"], returns)
    assert np.all(np.diff(res["t"]) >= 0)
    assert env.get_episode_lengths() == lengths
    assert env.get_total_steps() == sum(lengths)


def test_load_results_merges_files_sorted(tmp_path):
    for i in range(2):
        env = Monitor(gym.make("IdentityDiscrete-v0", max_episode_steps=3) if _register() else None,
                      str(tmp_path / str(i)))
        env.reset(seed=i)
        for _ in range(6):
            _, _, term, trunc, _ = env.step(0)
            if term or trunc:
                env.reset()
        env.close()
    res = load_results(str(tmp_path))
    assert len(res["r"]) == 4
    assert set(res["l"].tolist()) == {3}
    assert np.all(np.diff(res["t"]) >= 0)


def _register():
    import envs  # noqa: F401

    return True


def test_early_reset_refused_when_asked():
    env = Monitor(gym.make("CartPole-v1"), allow_early_resets=False)
    env.reset(seed=0)
    env.step(0)
    with pytest.raises(RuntimeError, match="allow_early_resets"):
        env.reset()


def test_load_results_empty_folder(tmp_path):
    with pytest.raises(LoadMonitorResultsError, match="no"):
        load_results(str(tmp_path))


def test_info_keywords_recorded(tmp_path):
    class Tag(gym.Wrapper):
        def step(self, a):
            obs, r, term, trunc, info = self.env.step(a)
            info["level"] = 7
            return obs, r, term, trunc, info

    env = Monitor(Tag(gym.make("CartPole-v1")), str(tmp_path / "x"), info_keywords=("level",))
    env.reset(seed=0)
    while not any(env.step(0)[2:4]):
        pass
    env.close()
    res = load_results(str(tmp_path))
    np.testing.assert_array_equal(res["level"], [7.0])

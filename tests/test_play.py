"""runner.play and run's --play."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import run
from common.vec_env import DummyVecEnv
from runner.env_factory import make_vec_env
from runner.play import PlayResult, play
from tests.fake_alg import FakeModel

FAKE = "--alg=tests.fake_alg:learn"


def _model(venv, recurrent: bool = False, seed: int = 0) -> FakeModel:
    return FakeModel(venv.observation_space, venv.action_space, {}, recurrent=recurrent, seed=seed)


def test_counts_episodes_in_raw_units_despite_reward_scale() -> None:
    venv = make_vec_env("CartPole-v1", "classic_control", 2, seed=0, reward_scale=0.01, logger_dir="")
    lines: list[str] = []
    result = play(_model(venv), venv, episodes=3, out=lines.append)
    venv.close()
    assert len(result.returns) == 3 and result.raw_units
    assert result.returns == [float(n) for n in result.lengths]  # CartPole pays 1 per step, unscaled
    assert lines[:3] == [f"episode {i + 1}: return {r:.6g} length {n}"
                         for i, (r, n) in enumerate(zip(result.returns, result.lengths, strict=True))]
    assert lines[3].startswith("played 3 episodes: return mean ")


def test_recurrent_state_is_carried_and_reset_per_episode() -> None:
    venv = make_vec_env("IdentityDiscrete-v0", "envs", 2, seed=0, logger_dir="")  # 100-step episodes
    model = _model(venv, recurrent=True)
    result = play(model, venv, episodes=3, out=lambda s: None)
    venv.close()
    states = np.array(model.states_seen)  # steps since each env's episode start, as the model saw it
    assert result.lengths == [100, 100, 100]
    assert states.shape == (200, 2)
    expected = np.tile(np.arange(1, 101), 2)
    np.testing.assert_array_equal(states, np.stack([expected, expected], axis=1))


def test_stochastic_uses_sampled_actions() -> None:
    venv = make_vec_env("CartPole-v1", "classic_control", 1, seed=0, logger_dir="")
    det = play(_model(venv), venv, episodes=2, out=lambda s: None)
    sto = play(_model(venv), venv, episodes=2, deterministic=False, out=lambda s: None)
    venv.close()
    assert det.lengths[0] < 15  # always pushing left falls quickly
    assert det.lengths != sto.lengths


def test_ctrl_c_ends_with_summary() -> None:
    class Interrupting(FakeModel):
        calls = 0

        def predict(self, *a, **k):
            self.calls += 1
            if self.calls > 50:
                raise KeyboardInterrupt
            return super().predict(*a, **k)

    venv = make_vec_env("CartPole-v1", "classic_control", 1, seed=0, logger_dir="")
    lines: list[str] = []
    result = play(Interrupting(venv.observation_space, venv.action_space, {}), venv, episodes=0, out=lines.append)
    venv.close()
    assert result.interrupted and len(result.returns) >= 1
    assert lines[-1].startswith(f"played {len(result.returns)} episode") and "(stopped by Ctrl-C)" in lines[-1]


def test_without_monitor_sums_rewards_and_says_so() -> None:
    venv = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    result = play(_model(venv), venv, episodes=1, out=lambda s: None)
    venv.close()
    assert not result.raw_units and result.returns == [float(result.lengths[0])]
    assert "no Monitor found" in result.summary()


def test_summary_numbers() -> None:
    r = PlayResult(returns=[1.0, 3.0], lengths=[10, 20])
    assert r.summary() == "played 2 episodes: return mean 2 std 1 min 1 max 3, length mean 15.0"
    with pytest.raises(ValueError, match="episodes must be >= 0"):
        play(None, None, episodes=-1)


def test_play_after_training_headless_says_so(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    run.main([FAKE, "--env=CartPole-v1", "--num_timesteps=32", f"--log_path={tmp_path}", "--log_format=csv",
              "--play", "--play_episodes=2", "--seed=0"])
    out = capsys.readouterr().out
    assert "no display found" in out and "--play_video" in out
    assert "played 2 episodes" in out


def test_play_video_writes_mp4(tmp_path, capsys) -> None:
    pytest.importorskip("imageio_ffmpeg")
    videos = tmp_path / "videos"
    run.main([FAKE, "--env=CartPole-v1", "--num_timesteps=32", f"--log_path={tmp_path}", "--log_format=csv",
              "--play", "--play_episodes=1", f"--play_video={videos}", "--save_video_length=20", "--seed=0"])
    files = sorted(p.name for p in videos.iterdir())
    assert files and all(f.endswith(".mp4") for f in files)
    assert "played 1 episode" in capsys.readouterr().out

"""NaN and infinity: refused up front, detected during training, never saved over a good file."""
import gymnasium as gym
import numpy as np
import pytest

import run
from common.errors import NonFiniteError, UserError


class _NanFromStep30(gym.Wrapper):
    """Returns NaN in what ``nan_step`` replaces from the 30th step on."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.steps = 0

    def step(self, action):
        out = self.env.step(action)
        self.steps += 1
        return self.nan_step(out) if self.steps >= 30 else out


class NanRewardEnv(_NanFromStep30):
    """Returns a NaN reward from the 30th step on."""

    @staticmethod
    def nan_step(out: tuple) -> tuple:
        obs, _, terminated, truncated, info = out
        return obs, float("nan"), terminated, truncated, info


class NanObservationEnv(_NanFromStep30):
    """Returns NaN observations from the 30th step on."""

    @staticmethod
    def nan_step(out: tuple) -> tuple:
        obs, reward, terminated, truncated, info = out
        return np.full_like(obs, np.nan), reward, terminated, truncated, info


@pytest.mark.parametrize("flag", ["--lr=nan", "--cliprange=inf", "--reward_scale=nan"])
def test_non_finite_settings_are_refused_up_front(flag: str) -> None:
    with pytest.raises(UserError, match="finite") as e:
        run.main(["--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=256", flag])
    assert "\n" not in str(e.value)


def test_diverged_training_stops_and_keeps_the_good_file(tmp_path) -> None:
    save = tmp_path / "m.zip"
    save.write_bytes(b"a good model")
    with pytest.raises(NonFiniteError, match=r"training diverged by \d+ env steps: .* holds NaN"):
        run.main(["--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=1024", "--nsteps=64", "--lr=1e30",
                  "--max_grad_norm=None", "--vf_coef=1e30", f"--save_path={save}", f"--log_path={tmp_path / 'log'}",
                  "--log_format=csv", "--no_progress", "--log_interval=1"])
    assert save.read_bytes() == b"a good model"


@pytest.mark.parametrize("alg, env, extra", [
    ("ppo2", "CartPole-v1", ["--nsteps=64"]),
    ("deepq", "CartPole-v1", ["--learning_starts=16"]),
    ("sac", "Pendulum-v1", ["--learning_starts=16", "--batch_size=8"]),
])
def test_nan_reward_from_the_env_stops_with_one_line_and_saves(tmp_path, alg: str, env: str,
                                                               extra: list[str]) -> None:
    """The reward is caught before any update can turn it into NaN weights, whenever the episode ends; the
    model, still good, is saved."""
    save = tmp_path / "m.zip"
    with pytest.raises(NonFiniteError, match="returned a non-finite reward") as e:
        run.main([f"--alg={alg}", f"--env={env}", "--num_timesteps=1024", *extra,
                  "--wrapper=tests.test_non_finite:NanRewardEnv", f"--log_path={tmp_path}", "--log_format=csv",
                  "--no_progress", f"--save_path={save}"])
    assert "\n" not in str(e.value)
    assert str(e.value).endswith(f"; model saved to {save}") and save.is_file()


@pytest.mark.parametrize("alg, env, extra", [
    ("ppo2", "CartPole-v1", ["--nsteps=64"]),
    ("deepq", "CartPole-v1", ["--learning_starts=16"]),
    ("sac", "Pendulum-v1", ["--learning_starts=16", "--batch_size=8"]),
])
def test_nan_observation_is_named_as_the_envs_and_saves(tmp_path, alg: str, env: str, extra: list[str]) -> None:
    """Not as a diverged layer: the observation is checked before the model sees it in an update. The seed is
    fixed: an episode that ends on the 30th step shows the reset observation there, and the NaN one a step later."""
    save = tmp_path / "m.zip"
    with pytest.raises(NonFiniteError) as e:
        run.main([f"--alg={alg}", f"--env={env}", "--num_timesteps=1024", *extra,
                  "--wrapper=tests.test_non_finite:NanObservationEnv", f"--log_path={tmp_path}",
                  "--log_format=csv", "--no_progress", f"--save_path={save}", "--seed=0"])
    assert str(e.value) == f"env 0 returned a NaN or infinite observation at step 30; stopped; model saved to {save}"


def test_reward_check_names_the_env_whose_rewards_turned_non_finite() -> None:
    """A rollout where env 1's rewards turn NaN part-way (its earlier ones finite) names env 1."""
    import types

    import numpy as np

    from algos.training import TrainingRun

    rewards = np.ones((64, 3), np.float32)
    rewards[29:, 1] = np.nan
    run_state = types.SimpleNamespace(env=types.SimpleNamespace(num_envs=3), check_finite=lambda timesteps: None)
    with pytest.raises(NonFiniteError, match="env 1 returned a non-finite reward by 192 env steps"):
        TrainingRun.check_rewards(run_state, rewards, 192)

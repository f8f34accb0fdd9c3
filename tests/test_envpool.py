"""--vec_env=envpool: the id mapping, the one-line errors, and the adapter's VecEnv contract (with envpool)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import run
from common.vec_env.envpool_tasks import (
    ATARI_SETTINGS,
    EnvpoolError,
    task_id,
    task_settings,
)
from tests import fake_alg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = "--alg=tests.fake_alg:learn"
needs_envpool = pytest.mark.skipif(importlib.util.find_spec("envpool") is None,
                                   reason="needs envpool: pip install -r requirements-envpool.txt")


@pytest.mark.parametrize(("env_id", "env_type", "task"), [
    ("PongNoFrameskip-v4", "atari", "Pong-v5"),
    ("ALE/SpaceInvaders-v5", "atari", "SpaceInvaders-v5"),
    ("HalfCheetah-v5", "mujoco", "HalfCheetah-v5"),
    ("Hopper-v4", "mujoco", "Hopper-v4"),
    ("CartPole-v1", "classic_control", "CartPole-v1"),
    ("Pendulum-v1", "classic_control", "Pendulum-v1"),
])
def test_covered_ids_map_to_envpool_tasks(env_id: str, env_type: str, task: str) -> None:
    assert task_id(env_id, env_type) == task


@pytest.mark.parametrize(("env_id", "env_type"), [
    ("LunarLander-v3", "box2d"), ("PongDeterministic-v4", "atari"), ("Hopper-v3", "mujoco"),
    ("IdentityDiscrete-v0", "envs")])
def test_other_ids_are_refused_naming_the_covered_families(env_id: str, env_type: str) -> None:
    with pytest.raises(EnvpoolError, match=f"covers Atari .*MuJoCo .*classic control .*; not {env_id}"):
        task_id(env_id, env_type)


def test_atari_settings_are_those_of_the_runners_atari_wrappers() -> None:
    training = task_settings("atari")
    assert training == {**ATARI_SETTINGS, "episodic_life": True, "reward_clip": True, "stack_num": 1}
    assert (training["frame_skip"], training["noop_max"], training["repeat_action_probability"],
            training["full_action_space"], training["gray_scale"]) == (4, 30, 0.0, False, True)
    assert task_settings("atari", {"frame_stack": True})["stack_num"] == 4  # deepq stacks in the env
    assert task_settings("mujoco", env_kwargs={"include_cfrc_ext_in_observation": False}) == {
        "use_contact_force": False}


def test_missing_envpool_is_one_line_naming_the_requirements_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "envpool", None)  # any import of envpool now fails
    fake_alg.CALLS.clear()
    with pytest.raises(EnvpoolError) as e:
        run.main([FAKE, "--env=CartPole-v1", "--vec_env=envpool", "--num_timesteps=64", "--log_path="])
    assert str(e.value) == ("--vec_env=envpool needs the envpool package, an optional extra: "
                            "pip install -r requirements-envpool.txt")
    assert fake_alg.CALLS == []


def test_uncovered_env_on_the_command_line_is_one_line_and_exit_2() -> None:
    proc = subprocess.run([sys.executable, "-m", "run", FAKE, "--env=LunarLander-v3", "--vec_env=envpool",
                           "--num_timesteps=64", "--log_path="], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("run: error: --vec_env=envpool covers Atari")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def _cartpole(num_envs: int = 3, seed: int = 7, **env_kwargs):
    from common.vec_env.envpool_vec_env import make_envpool_vec_env

    return make_envpool_vec_env("CartPole-v1", "classic_control", num_envs, seed, env_kwargs=env_kwargs)


@needs_envpool
def test_adapter_resets_finished_envs_in_the_same_step() -> None:
    venv = _cartpole()
    obs = venv.reset()
    assert obs.shape == (3, 4) and obs.dtype == np.float32
    steps = np.zeros(3, dtype=int)
    finished = 0
    for _ in range(200):
        obs, rewards, dones, infos = venv.step(np.ones(3, dtype=np.int64))  # always right: falls in ~10 steps
        assert rewards.dtype == np.float32 and dones.dtype == bool and len(infos) == 3
        steps += 1
        for i in np.flatnonzero(dones):
            info = infos[i]
            assert info["terminal_observation"].shape == (4,)
            assert abs(info["terminal_observation"][2]) > 0.2  # the pole fell ...
            assert np.all(np.abs(obs[i]) <= 0.05)  # ... and the next episode's first observation is returned
            assert info["TimeLimit.truncated"] is False
            assert info["episode"]["l"] == steps[i] and info["episode"]["r"] == steps[i]
            steps[i] = 0
            finished += 1
        assert all("terminal_observation" not in infos[i] for i in np.flatnonzero(~dones))
    assert finished >= 30
    venv.close()


@needs_envpool
def test_adapter_marks_time_limits_as_truncation() -> None:
    venv = _cartpole(num_envs=2, max_episode_steps=5)
    venv.reset()
    for _ in range(4):
        assert not venv.step(np.array([0, 1]) if _ % 2 else np.array([1, 0]))[2].any()
    _, _, dones, infos = venv.step(np.array([0, 1]))
    assert dones.all() and all(info["TimeLimit.truncated"] is True for info in infos)
    venv.close()


@needs_envpool
def test_adapter_seeds_env_i_with_seed_plus_i() -> None:
    first = _cartpole(num_envs=3, seed=7).reset()
    assert np.array_equal(_cartpole(num_envs=3, seed=7).reset(), first)
    assert np.array_equal(_cartpole(num_envs=1, seed=8).reset()[0], first[1])
    venv = _cartpole(num_envs=3, seed=1)
    venv.reset()
    venv.seed(7)  # takes effect at the next reset, as our vec envs' seed() does
    assert np.array_equal(venv.reset(), first)
    venv.close()


@needs_envpool
def test_atari_episode_is_the_whole_game_in_the_runners_frame_layout() -> None:
    from common.vec_env.envpool_vec_env import make_envpool_vec_env

    venv = make_envpool_vec_env("BreakoutNoFrameskip-v4", "atari", 2, 0)
    assert venv.observation_space.shape == (84, 84, 1) and venv.action_space.n == 4
    venv.reset()
    lives_lost = 0
    rng = np.random.default_rng(0)
    for _ in range(2000):
        obs, _, dones, infos = venv.step(rng.integers(0, 4, 2))
        assert obs.shape == (2, 84, 84, 1) and obs.dtype == np.uint8
        if "episode" in infos[0]:
            break
        lives_lost += int(dones[0])
    assert lives_lost == 4  # five lives: four life losses end training episodes, the fifth ends the game
    venv.close()


@needs_envpool
def test_run_trains_on_envpool_with_one_monitor_file_per_env(tmp_path) -> None:
    fake_alg.CALLS.clear()
    run.main([FAKE, "--env=CartPole-v1", "--vec_env=envpool", "--num_env=2", "--num_timesteps=512", "--seed=1",
              f"--log_path={tmp_path}", "--log_format=csv"])
    assert fake_alg.CALLS[-1]["num_envs"] == 2
    for name in ("0.0.monitor.csv", "0.1.monitor.csv"):
        rows = (tmp_path / name).read_text().splitlines()
        assert rows[1] == "r,l,t" and len(rows) > 3


@needs_envpool
def test_adapter_renders_for_training_videos(tmp_path) -> None:
    from common.vec_env.vec_video_recorder import VecVideoRecorder

    venv = VecVideoRecorder(_cartpole(num_envs=2, render_mode="rgb_array"), str(tmp_path),
                            record_video_trigger=lambda step: step == 0, video_length=5)
    venv.reset()
    for _ in range(6):
        venv.step(np.zeros(2, dtype=np.int64))
    venv.close()
    assert [os.path.basename(v) for v in venv.videos] == ["rl-video-step-0-to-step-4.mp4"]


@needs_envpool
@pytest.mark.parametrize(("env_id", "env_type"), [
    ("CartPole-v1", "classic_control"), ("Pendulum-v1", "classic_control"), ("HalfCheetah-v5", "mujoco"),
    ("PongNoFrameskip-v4", "atari")])
def test_adapter_spaces_are_those_of_the_runners_envs(env_id: str, env_type: str) -> None:
    from common.vec_env.envpool_vec_env import make_envpool_vec_env
    from runner.env_factory import make_env

    venv, env = make_envpool_vec_env(env_id, env_type, 1, 0), make_env(env_id, env_type)
    assert (venv.observation_space, venv.action_space) == (env.observation_space, env.action_space)
    venv.close()
    env.close()

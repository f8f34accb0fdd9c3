"""PettingZoo parallel envs trained with one shared policy (``common.games.parallel``,
``common.vec_env.agent_vec_env``): rows per agent, padding, one-hot ids and masks, agents leaving early,
per-group returns in the logs, the on-policy algorithms and deepq through the runner, play, and resume."""
from __future__ import annotations

import csv
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

import run
from common.errors import ConfigError, UserError
from common.files.model_file import load_model_file
from common.games.parallel import AgentLayout, AgentSpacesError
from common.vec_env.agent_vec_env import AgentVecEnv
from common.wrappers.user_wrappers import apply_parallel_wrappers
from envs.pettingzoo_toys import GatherParallel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GATHER = "--env=envs.pettingzoo_toys:gather_v0"
SCOUT = "--env_kwargs={'scout': True}"


def _progress(log: str) -> list[dict[str, str]]:
    with open(os.path.join(log, "progress.csv"), newline="") as f:
        return list(csv.DictReader(f))


def test_agents_are_rows_padded_with_ids_and_masks_and_leave_early() -> None:
    env = AgentVecEnv([lambda: GatherParallel(walkers=2, size=3, scout=True)] * 2, "gather")
    assert env.num_envs == 6 and env.agent_groups == ("walker", "scout")
    assert env.observation_space.shape == (3 + 3,)  # the scout's 3 numbers, then a one-hot of 3 agents
    env.seed(0)
    obs = env.reset()
    np.testing.assert_array_equal(obs[:, 3:], np.tile(np.eye(3), (2, 1)))
    assert [list(i["action_mask"]) for i in env.reset_infos[:3]] == [[True] * 3, [True] * 3, [True, True, False]]
    left = np.zeros(6, bool)
    for _ in range(30):
        pos_goal = obs[:, :2]
        actions = np.where(pos_goal[:, 0] < pos_goal[:, 1], 2, 0)  # walkers step towards their goal
        actions[2::3] = 0  # the scout stays: it never leaves before the end
        obs, rewards, dones, infos = env.step(actions)
        for i in np.flatnonzero(dones & ~left & (np.arange(6) % 3 != 2)):
            if not dones[3 * (i // 3) + 2]:  # a walker left while its env goes on
                assert infos[i]["episode"]["group"] == "walker" and infos[i]["episode"]["r"] > 0
                np.testing.assert_array_equal(obs[i], np.r_[0, 0, 0, np.eye(3)[i % 3]])  # zeros and its id
                assert list(env.reset_infos[i]["action_mask"]) == [True, False, False]  # only move 0
                left[i] = True
        if left.any():
            dead = np.flatnonzero(left)
            obs, rewards, dones, infos = env.step(np.zeros(6, int))
            assert (rewards[dead] == 0).all() and not any("episode" in infos[i] for i in dead if not dones[i])
            break
    assert left.any()


def test_team_return_is_the_sum_of_the_agents_returns() -> None:
    env = AgentVecEnv([lambda: GatherParallel(walkers=3, size=4, max_cycles=5)], "gather")
    env.seed(1)
    env.reset()
    returns, team = np.zeros(3), None
    while team is None:
        _, _, dones, infos = env.step(np.ones(3, int))  # everyone stays: the episode ends at max_cycles
        for i in np.flatnonzero(dones):
            returns[i] = infos[i]["episode"]["r"]
            team = infos[i]["episode"].get("team", team)
    assert team == pytest.approx(returns.sum()) and team == pytest.approx(-0.1 * 5 * 3)


class _TwoKinds:
    """A stand-in parallel env whose two agents have Box actions of different shapes."""

    possible_agents = ("arm_0", "leg_0")

    def observation_space(self, agent: str):
        import gymnasium as gym
        return gym.spaces.Box(-1, 1, (2,), np.float32)

    def action_space(self, agent: str):
        import gymnasium as gym
        return gym.spaces.Box(-1, 1, (1 if agent == "arm_0" else 2,), np.float32)


def test_action_spaces_that_cannot_be_padded_are_refused_naming_them() -> None:
    with pytest.raises(AgentSpacesError, match=r"arm_0: Box.*\(1,\).*leg_0: Box.*\(2,\)") as e:
        AgentLayout(_TwoKinds(), "two_kinds")
    assert isinstance(e.value, UserError) and "\n" not in str(e.value)


@pytest.mark.parametrize("alg, settings", [
    ("ppo2", ["--nsteps=32", "--nminibatches=4"]),
    ("a2c", ["--nsteps=8"]),
    ("trpo", ["--timesteps_per_batch=128"]),
    ("deepq", ["--learning_starts=100", "--train_freq=4"]),
])
def test_one_shared_network_trains_on_every_agents_rows(alg, settings, tmp_path) -> None:
    """One network for the walkers and the scout (the padded observation with the one-hot id is its input);
    each agent group's returns and the team's are logged."""
    log = str(tmp_path / "log")
    model = run.main([f"--alg={alg}", GATHER, SCOUT, "--num_env=2", "--seed=2", "--num_timesteps=1024",
                      "--num_hidden=16", "--log_format=csv", "--no_progress", f"--log_path={log}", *settings])
    assert model.observation_space.shape == (3 + 4,) and model.action_space.n == 3
    first = [n for n, a in model.get_arrays().items() if n.endswith("/net/layers/0/w") and not n.startswith("target")]
    assert len(first) == 1 and model.get_arrays()[first[0]].shape == (7, 16)  # one policy (or Q) network
    rows = _progress(log)
    if alg != "deepq":  # one update's samples: every step of each of the 2 envs' 4 agents
        batch = 8 * (32 if alg == "ppo2" else 8 if alg == "a2c" else 16)
        assert int(rows[0]["time/total_timesteps"]) == batch
    last = rows[-1]
    for group in ("walker", "scout", "team"):
        assert np.isfinite(float(last[f"rollout/ep_rew_mean/{group}"])), group


def test_play_after_training_reports_each_agents_episodes(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "run", "--alg=ppo2", GATHER, "--num_timesteps=512", "--nsteps=64",
                           "--seed=1", f"--log_path={tmp_path / 'log'}", "--play", "--play_episodes=6",
                           "--no_progress"], check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "episode 6: return" in proc.stdout and "played 6 episodes" in proc.stdout


def test_a_gymnasium_wrapper_on_a_parallel_env_is_one_line(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "run", "--alg=ppo2", GATHER, "--num_timesteps=512",
                           "--wrapper=gymnasium.wrappers:RecordEpisodeStatistics", f"--log_path={tmp_path / 'log'}"],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("run: error: --wrapper 'gymnasium.wrappers:RecordEpisodeStatistics' wraps gymnasium envs")
    assert "supersuit:resize_v1" in last


@pytest.mark.parametrize("flag", ["--play_video=videos", "--save_video_interval=100"])
def test_video_of_a_parallel_env_is_refused_before_training(flag, tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "run", "--alg=ppo2", GATHER, "--num_timesteps=512", "--play", flag,
                           f"--log_path={tmp_path / 'log'}"], check=False, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("run: error: --play_video and --save_video_interval")
    assert not (tmp_path / "log" / "progress.csv").exists()  # nothing trained


def test_functions_of_parallel_envs_wrap_each_env_in_order() -> None:
    env = apply_parallel_wrappers(GatherParallel(), ["envs.pettingzoo_toys:scale_rewards(factor=10.0)",
                                                     "envs.pettingzoo_toys:scale_rewards(factor=-1.0)"])
    env.reset(seed=0)
    _, rewards, *_ = env.step({a: 1 for a in env.agents})  # stay: -0.1 each, times 10, times -1
    assert rewards == pytest.approx({a: 1.0 for a in rewards})
    for spec, says in [("envs.pettingzoo_toys:scale_rewards(scale=2)", "unexpected keyword argument 'scale'"),
                       ("builtins:repr", "returned str, not a PettingZoo parallel env"),
                       ("envs.pettingzoo_toys:nothing_here", "has no nothing_here")]:
        with pytest.raises(ConfigError, match=says):
            apply_parallel_wrappers(GatherParallel(), [spec])


def test_supersuits_wrappers_work_on_parallel_envs() -> None:
    pytest.importorskip("supersuit")
    env = apply_parallel_wrappers(GatherParallel(), ["supersuit:clip_reward_v0(lower_bound=-0.05, upper_bound=1)"])
    env.reset(seed=0)
    _, rewards, *_ = env.step({a: 1 for a in env.agents})
    assert rewards == pytest.approx({a: -0.05 for a in rewards})
    with pytest.raises(ConfigError, match="does not take this env"):  # SuperSuit asserts on the spaces
        apply_parallel_wrappers(GatherParallel(), ["supersuit:color_reduction_v0(mode='B')"])


def test_pistonballs_observations_show_the_game_as_it_moves() -> None:
    """PettingZoo's pygame envs draw the screen their image observations are cut from only with a render mode:
    the runner makes them with render_mode="rgb_array" unless the user names one."""
    pytest.importorskip("pymunk")
    from common.games.parallel import make_parallel
    from runner.env_factory import make_agent_vec_env

    venv = make_agent_vec_env("pettingzoo.butterfly:pistonball_v6", 1, env_kwargs={"n_pistons": 4})
    first = venv.reset().copy()
    rng = np.random.default_rng(0)
    for _ in range(5):
        obs, _, _, _ = venv.step(rng.uniform(-1, 1, (4, 1)).astype(np.float32))
    venv.close()
    assert all(not np.array_equal(first[i], obs[i]) for i in range(4))  # each piston sees pistons move
    env = make_parallel("pettingzoo.butterfly:pistonball_v6", n_pistons=4, render_mode=None)
    assert env.unwrapped.render_mode is None  # a render mode the user names is kept
    env.close()


def test_pistonball_trains_on_supersuits_small_grey_frames(tmp_path) -> None:
    pytest.importorskip("supersuit")
    pytest.importorskip("pymunk")
    wrappers = ["--wrapper=supersuit:color_reduction_v0(mode='B')", "--wrapper=supersuit:resize_v1(x_size=36, y_size=36)",
                "--wrapper=supersuit:frame_stack_v1(stack_size=2)"]
    proc = subprocess.run([sys.executable, "-m", "run", "--alg=ppo2", "--env=pettingzoo.butterfly:pistonball_v6",
                           "--env_kwargs={'n_pistons': 4}", "--num_env=1", "--nsteps=8", "--minibatch_size=16",
                           "--noptepochs=1", "--num_timesteps=64", *wrappers, f"--save_path={tmp_path / 'm.zip'}",
                           "--no_progress"], check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    metadata, _ = load_model_file(str(tmp_path / "m.zip"))
    assert metadata["observation_space"]["shape"] == [36, 36, 2] and metadata["network"] == "cnn"  # the entry's CNN
    assert metadata["hyperparameters"]["cliprange"] == 0.1  # and its other values


def test_a_run_with_a_parallel_env_wrapper_keeps_it_in_the_model_file(tmp_path) -> None:
    spec = "envs.pettingzoo_toys:scale_rewards(factor=0.0)"
    proc = subprocess.run([sys.executable, "-m", "run", "--alg=ppo2", GATHER, "--num_timesteps=512", "--nsteps=64",
                           f"--wrapper={spec}", f"--log_path={tmp_path / 'log'}", f"--save_path={tmp_path / 'm.zip'}",
                           "--no_progress", "--play", "--play_episodes=3"],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "episode 3: return 0" in proc.stdout  # play runs the wrapped env too
    rewards = [float(r["rollout/ep_rew_mean"]) for r in _progress(str(tmp_path / "log")) if r["rollout/ep_rew_mean"]]
    assert rewards and set(rewards) == {0.0}  # unscaled: -0.1 a step and +1 at the goal
    assert spec in str(load_model_file(str(tmp_path / "m.zip")))


def test_killed_and_resumed_run_ends_bit_identical(tmp_path, capsys) -> None:
    """The env's state, the rows' returns and the per-group windows resume exactly."""
    n = 512
    argv = ["--alg=ppo2", GATHER, SCOUT, "--num_env=2", "--seed=3", f"--num_timesteps={2 * n}", "--nsteps=16",
            f"--checkpoint_freq={n}", "--num_hidden=16", "--log_format=csv,log", "--no_progress"]
    straight, crashed = str(tmp_path / "straight"), str(tmp_path / "crashed")
    run.main([*argv, f"--log_path={straight}", f"--save_path={straight}.zip"])
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "resume_crash.py"), str(n + 300), "--",
                           *argv, f"--log_path={crashed}", f"--save_path={crashed}.zip"],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]
    capsys.readouterr()
    run.main([f"--resume={crashed}", GATHER, f"--save_path={crashed}.zip"])  # --env imports a module: given again
    assert f"resumed from step {n} (" in capsys.readouterr().out
    a, b = load_model_file(f"{straight}.zip")[1], load_model_file(f"{crashed}.zip")[1]
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    keys = [k for k in _progress(straight)[0] if k.startswith("rollout/")]
    assert len(keys) == 5  # ep_len_mean, ep_rew_mean and the walker, scout and team means
    assert [[r[k] for k in keys] for r in _progress(straight)] == [[r[k] for k in keys] for r in _progress(crashed)]

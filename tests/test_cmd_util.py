"""The runner's argument parsing and env factories."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

from common.arg_parser import ArgumentError, common_arg_parser, parse_cmdline_kwargs
from common.env_factory import (
    ClipActionWrapper,
    RewardScaleWrapper,
    make_env,
    make_vec_env,
)

FLAG_TABLE = [
    (["--env=CartPole-v1"], "env", "CartPole-v1"),
    (["--env", "mypkg.envs:My-v0"], "env", "mypkg.envs:My-v0"),
    (["--env_type=atari"], "env_type", "atari"),
    (["--seed=3"], "seed", 3),
    (["--alg=deepq"], "alg", "deepq"),
    (["--num_timesteps=1e6"], "num_timesteps", 1_000_000),
    (["--num_timesteps", "2500"], "num_timesteps", 2500),
    (["--num_timesteps=0"], "num_timesteps", 0),
    (["--network=cnn"], "network", "cnn"),
    (["--gamestate=Level1"], "gamestate", "Level1"),
    (["--num_env=8"], "num_env", 8),
    (["--reward_scale=0.5"], "reward_scale", 0.5),
    (["--save_path=m.zip"], "save_path", "m.zip"),
    (["--load_path=m.zip"], "load_path", "m.zip"),
    (["--save_video_interval=1000"], "save_video_interval", 1000),
    (["--save_video_length=50"], "save_video_length", 50),
    (["--log_path=/tmp/x"], "log_path", "/tmp/x"),
    (["--log_format=csv,json"], "log_format", ["csv", "json"]),
    (["--vec_env=subproc"], "vec_env", "subproc"),
    (["--in_series=2"], "in_series", 2),
    (["--no_progress"], "no_progress", True),
    (["--play"], "play", True),
    (["--play_episodes=0"], "play_episodes", 0),
    (["--stochastic"], "stochastic", True),
    (["--play_video=vids"], "play_video", "vids"),
    (["--no_render"], "no_render", True),
]


@pytest.mark.parametrize(("argv", "name", "expected"), FLAG_TABLE)
def test_every_flag_parses(argv: list[str], name: str, expected: object) -> None:
    args, unknown = common_arg_parser().parse_known_args(argv)
    assert getattr(args, name) == expected
    assert unknown == []


def test_defaults() -> None:
    args = common_arg_parser().parse_args([])
    assert (args.alg, args.num_timesteps, args.num_env, args.seed, args.reward_scale) == (None, 1_000_000, None,
                                                                                           None, 1.0)
    assert (args.play, args.play_episodes, args.stochastic, args.vec_env) == (False, 5, False, "auto")


@pytest.mark.parametrize("argv", [["--num_env=0"], ["--num_timesteps=-1"], ["--num_timesteps=1.5"],
                                  ["--num_timesteps=lots"], ["--seed=x"], ["--log_format=csv,xml"],
                                  ["--vec_env=threads"], ["--in_series=0"], ["--play_episodes=-2"]])
def test_bad_flag_values_raise_argument_error(argv: list[str]) -> None:
    with pytest.raises(ArgumentError):
        common_arg_parser().parse_known_args(argv)


def test_no_abbreviations_steal_hyperparameters() -> None:
    _, unknown = common_arg_parser().parse_known_args(["--net=mlp", "--log=1"])
    assert unknown == ["--net=mlp", "--log=1"]


KWARG_TABLE = [
    (["--lr=3e-4"], {"lr": 3e-4}),
    (["--lr", "3e-4"], {"lr": 3e-4}),
    (["--nsteps=128"], {"nsteps": 128}),
    (["--ent_coef", "-0.5"], {"ent_coef": -0.5}),
    (["--dueling=False"], {"dueling": False}),
    (["--dueling=false"], {"dueling": False}),
    (["--layer_norm"], {"layer_norm": True}),
    (["--layer_norm", "--lr=1"], {"layer_norm": True, "lr": 1}),
    (["--hiddens=[64, 64]"], {"hiddens": [64, 64]}),
    (["--shape=(1,2)"], {"shape": (1, 2)}),
    (["--sched={'a': 1}"], {"sched": {"a": 1}}),
    (["--activation=relu"], {"activation": "relu"}),
    (["--activation='relu'"], {"activation": "relu"}),
    (["--path=/tmp/a b"], {"path": "/tmp/a b"}),
    (["--target=None"], {"target": None}),
    (["--learning-rate=2"], {"learning_rate": 2}),
    (["--code=__import__('os').system('true')"], {"code": "__import__('os').system('true')"}),
]


@pytest.mark.parametrize(("argv", "expected"), KWARG_TABLE)
def test_parse_cmdline_kwargs(argv: list[str], expected: dict) -> None:
    got = parse_cmdline_kwargs(argv)
    assert got == expected
    assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]


@pytest.mark.parametrize("argv", [["stray"], ["--lr=1", "x", "y"], ["--=3"], ["--1a=2"]])
def test_parse_cmdline_kwargs_rejects_junk(argv: list[str]) -> None:
    with pytest.raises(ArgumentError):
        parse_cmdline_kwargs(argv)


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
    import run_util

    args, _ = run.parse_args(["--env=PongNoFrameskip-v4", "--num_env=2", "--seed=0", "--vec_env=subproc"])
    assert run_util.get_env_type(args.env)[0] == "atari"
    assert run.default_network("atari") == "cnn"
    venv = run.build_env(args)
    try:
        obs = venv.reset()
        assert obs.shape == (2, 84, 84, 4) and obs.dtype == np.uint8
        obs, rewards, _, _ = venv.step(np.zeros(2, dtype=np.int64))
        assert obs.shape == (2, 84, 84, 4) and rewards.shape == (2,)
        assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0}  # clipped rewards
    finally:
        venv.close()

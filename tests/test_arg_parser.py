"""runner.cli: the runner's flags and the hyperparameters passed on to learn."""

from __future__ import annotations

import pytest

from runner.cli import ArgumentError, common_arg_parser, parse_cmdline_kwargs

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


COUNT_FLAGS = ["--num_timesteps", "--num_env", "--save_video_interval", "--save_video_length", "--keep_checkpoints",
               "--checkpoint_freq", "--in_series", "--eval_freq", "--eval_episodes", "--eval_envs", "--play_episodes"]


@pytest.mark.parametrize("flag", COUNT_FLAGS)
def test_every_count_flag_reads_5e5_and_refuses_fractions(flag: str) -> None:
    args, _ = common_arg_parser().parse_known_args([f"{flag}=5e5"])
    assert getattr(args, flag[2:]) == 500_000
    with pytest.raises(ArgumentError, match=f"argument {flag}: must be a whole number, got 1.5"):
        common_arg_parser().parse_known_args([f"{flag}=1.5"])

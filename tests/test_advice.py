"""Advice where an algorithm does not fit an env: a2c's default of 8 envs, the start note when the user gives
it one env, and the one-line note when a run's first episodes all return the same value at the time limit."""
from __future__ import annotations

import os

import pytest

import run
from algos.hyperparameters import table
from algos.training import EpisodeStats
from runner.app import complete_args, parse_args
from runner.cli import print_help
from runner.config import resolve

NOT_SEEN = "the agent has not yet seen another outcome"


def _config(argv: list[str]):
    args, extra = parse_args(argv)
    return resolve(complete_args(args), extra)


def _log(folder) -> str:
    with open(os.path.join(folder, "log.txt"), encoding="utf-8") as f:
        return f.read()


def _train(tmp_path, *argv: str) -> str:
    """The log.txt of a tiny run of ``argv``."""
    log = tmp_path / "log"
    run.main([*argv, "--seed=0", "--no_progress", "--log_format=log", "--vec_env=dummy", f"--log_path={log}"])
    return _log(log)


def test_a2c_trains_8_envs_by_default_and_says_where_that_comes_from(tmp_path, capsys) -> None:
    text = _train(tmp_path, "--alg=a2c", "--env=CartPole-v1", "--num_timesteps=512")
    assert "num_env = 8  [runner default for a2c]" in text and "for 512 timesteps with 8 env(s)" in text
    assert "with one env" not in text
    print_help(["--alg=a2c", "--env=CartPole-v1", "--help"])
    assert "  num_env = 8  [runner default for a2c]" in capsys.readouterr().out


def test_every_source_of_num_env_wins_over_a2c_default_and_atari_keeps_its_own(tmp_path, monkeypatch) -> None:
    assert _config(["--alg=a2c", "--env=CartPole-v1"]).num_env == 8
    assert _config(["--alg=ppo2", "--env=CartPole-v1"]).num_env is None  # the others: 1 env (build_env)
    assert _config(["--alg=a2c", "--env=PongNoFrameskip-v4"]).num_env is None  # atari: one per CPU core
    assert _config(["--alg=a2c", "--env=CartPole-v1", "--num_env=2"]).num_env == 2
    hp = tmp_path / "hp.toml"
    hp.write_text("n_envs = 4\n")
    assert _config(["--alg=a2c", "--env=CartPole-v1", f"--hyperparams={hp}"]).num_env == 4
    entries = {**table("a2c").by_env_id, "CartPole-v1": {**table("a2c").by_env_id["CartPole-v1"], "num_env": 16}}
    monkeypatch.setattr(table("a2c"), "by_env_id", entries)
    config = _config(["--alg=a2c", "--env=CartPole-v1"])
    assert config.num_env == 16 and config.sources["num_env"] == 'hyperparams/a2c.toml [env."CartPole-v1"]'


def test_a2c_with_one_env_of_the_users_choice_says_at_start_what_helps(tmp_path) -> None:
    text = _train(tmp_path, "--alg=a2c", "--env=CartPole-v1", "--num_timesteps=512", "--num_env=1")
    line = ("note: a2c learns from nsteps x num_env samples per update, and with one env (--num_env=1) it often "
            "learns nothing; --num_env=8 helps")
    assert text.count(line) == 1 and "for 512 timesteps with 1 env(s)" in text  # a note: the run goes on
    hp = tmp_path / "hp.toml"
    hp.write_text('[env."CartPole-v1"]\nnum_env = 1\n')
    notes = _config(["--alg=a2c", "--env=CartPole-v1", f"--hyperparams={hp}"]).notes
    assert [n for n in notes if f'with one env (num_env = 1 in {hp} [env."CartPole-v1"])' in n]
    assert not [n for n in _config(["--alg=ppo2", "--env=CartPole-v1", "--num_env=1"]).notes if "one env" in n]


def _episode(ret: float, length: int = 200, truncated: bool = True) -> dict:
    return {"episode": {"r": ret, "l": length}, "TimeLimit.truncated": truncated}


@pytest.mark.parametrize("episodes, said", [
    ([_episode(-200.0)] * 20, True),
    ([_episode(-200.0)] * 19, False),  # too few yet
    ([_episode(-200.0)] * 19 + [_episode(-199.0)], False),  # another return
    ([_episode(-200.0)] * 19 + [_episode(-200.0, truncated=False)], False),  # one terminated
])
def test_the_no_signal_note_needs_20_equal_returns_all_at_the_time_limit(episodes, said, capsys) -> None:
    stats = EpisodeStats(advice="more noise helps")
    for ep in episodes:
        stats.add([ep])
    out = capsys.readouterr().out
    expected = "note: all 20 episodes so far returned -200.0 and ran to the time limit (200 steps)"
    assert out.count(NOT_SEEN) == said and (expected in out) == said and ("more noise helps" in out) == said
    for _ in range(25):  # later episodes: no second note (and none after another outcome)
        stats.add([_episode(-200.0)])
    assert NOT_SEEN not in capsys.readouterr().out or episodes == [_episode(-200.0)] * 19


@pytest.mark.parametrize("alg, env, settings, said", [
    ("deepq", "MountainCar-v0", ["--num_timesteps=4200", "--learning_starts=10000"], True),  # a random policy
    ("deepq", "CartPole-v1", ["--num_timesteps=1000", "--learning_starts=10000"], False),  # episodes terminate
    ("sac", "Pendulum-v1", ["--num_timesteps=4200", "--learning_starts=10000"], False),  # returns differ
])
def test_a_run_whose_first_episodes_all_end_alike_at_the_time_limit_says_what_helps(
        alg, env, settings, said, tmp_path) -> None:
    text = _train(tmp_path, f"--alg={alg}", f"--env={env}", "--num_env=1", *settings)
    assert text.count(NOT_SEEN) == said
    if said:
        assert ("note: all 20 episodes so far returned -200.0 and ran to the time limit (200 steps): the agent has "
                "not yet seen another outcome; longer epsilon exploration (--exploration_fraction=0.5) or noisy "
                "layers (--noisy=True) may help") in text

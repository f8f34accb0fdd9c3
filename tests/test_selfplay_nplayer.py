"""Self-play with more than two players: three in a row for 3 or 4 players (``envs/three_in_a_row.py``), seats
turning over episodes, pool opponents at every other seat, win rates and pairwise ratings over N players, a
``--self_play`` run through ``run.main``, ``--play``'s narration, and PettingZoo's hold'em for 3 players."""
from __future__ import annotations

import csv
import importlib.util
import os

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401 - registers ThreeInARow-v0
from common.games.match import placing_points, play_match
from common.games.players import PolicyWeights, RandomPlayer
from common.vec_env import DummyVecEnv
from envs.three_in_a_row import ThreeInARow, make_env
from envs.tictactoe import TicTacToe


def _weights(game: ThreeInARow, seed: int) -> PolicyWeights:
    """A small random policy for ``game`` (numpy only)."""
    rng = np.random.default_rng(seed)
    size, moves = game.observation_space.shape[0], game.action_space.n
    hidden = [rng.normal(0, 0.3, (size, 8)).astype(np.float32), np.zeros(8, np.float32)]
    return PolicyWeights(hidden, 1, False, "tanh", rng.normal(0, 0.3, (8, moves)).astype(np.float32),
                         np.zeros(moves, np.float32))


def _finish(env, rng: np.random.Generator, info: dict) -> float:
    """Play random legal moves to the end of the episode; the learner's return."""
    total, done = 0.0, False
    while not done:
        _, reward, done, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        total += reward
    return total


def test_three_in_a_row_rules_mask_and_perspective() -> None:
    g = ThreeInARow(3)
    g.reset()
    assert (g.size, g.observation_space.shape, g.action_space.n) == (4, (48,), 16)
    for move in (0, 5, 10, 1, 6):  # X: 0, 1; O: 5, 6; A: 10
        rewards, over = g.play(move)
        assert not over and not rewards.any()
    assert g.current_player() == 2 and list(np.flatnonzero(~g.legal_moves())) == [0, 1, 5, 6, 10]
    planes = g.observe(2).reshape(3, 16)  # the mover (A) first, then X (seat 0), then O (seat 1)
    assert list(np.flatnonzero(planes[0])) == [10] and list(np.flatnonzero(planes[1])) == [0, 1]
    assert list(np.flatnonzero(planes[2])) == [5, 6]
    with pytest.raises(ValueError, match="illegal move 5"):
        g.play(5)
    g.play(15)
    rewards, over = g.play(2)  # X completes 0-1-2
    assert over and list(rewards) == [1.0, -0.5, -0.5]
    four = ThreeInARow(4)
    assert (four.size, four.observation_space.shape, four.action_space.n) == (5, (100,), 25)
    assert gym.make("ThreeInARow-v0", num_players=4).unwrapped.num_players == 4


def test_seats_turn_over_episodes_and_envs() -> None:
    env = gym.make("ThreeInARow-v0").unwrapped
    seats = []
    for k in range(6):
        obs, info = env.reset(seed=3 if k == 0 else None)
        seats.append(info["seat"])
        assert obs.reshape(3, 16).sum() == info["seat"]  # the seats before the learner's have moved once each
        assert (info["action_mask"] == env.action_masks()).all() and env.action_masks().sum() == 16 - info["seat"]
    assert seats == [0, 1, 2, 0, 1, 2]
    venv = DummyVecEnv([lambda: gym.make("ThreeInARow-v0") for _ in range(3)])
    venv.seed(10)
    venv.reset()
    assert venv.get_attr("seat") == [1, 2, 0]  # envs seeded 10, 11, 12 start in different seats
    venv.close()


def test_every_other_seat_gets_an_opponent_from_the_pool() -> None:
    env = make_env(num_players=4)
    pool = [(name, _weights(env.game, k)) for k, name in enumerate(("a", "b", "c"))]
    env.set_opponent_pool(pool)
    env.reset(seed=0)
    mixed = 0
    for _ in range(100):
        env.reset()
        others = [p.name for s, p in enumerate(env.seated) if s != env.seat]
        assert env.seated[env.seat] is None and len(others) == 3 and set(others) <= {"a", "b", "c"}
        mixed += len(set(others)) > 1  # each seat is drawn on its own
    assert mixed > 50
    env.set_opponent_pool(pool, fixed_share=0.5)  # a share of the episodes: random players at every other seat
    tables = set()
    for _ in range(200):
        env.reset()
        tables.add(frozenset("random" if p.name == "random" else "pool" for p in env.seated if p is not None))
    assert tables == {frozenset({"random"}), frozenset({"pool"})}


def test_outcomes_count_each_opponent_once_per_game() -> None:
    env = make_env(num_players=3)
    env.set_opponent_pool([("a", _weights(env.game, 0)), ("b", _weights(env.game, 1))])
    rng = np.random.default_rng(0)
    expected: dict[str, list[int]] = {}
    _, info = env.reset(seed=1)
    for _ in range(60):
        names = {p.name for p in env.seated if p is not None}
        ret = _finish(env, rng, info)
        for name in names:
            expected.setdefault(name, [0, 0, 0])[0 if ret > 0 else 2 if ret < 0 else 1] += 1
        _, info = env.reset()
    outcomes = env.take_outcomes()
    assert outcomes == expected and sum(expected["a"]) + sum(expected["b"]) > 60  # tables with both count for both


def test_win_rates_and_pairwise_placings_over_n_players() -> None:
    assert placing_points(np.array([1.0, -0.5, -0.5]), 0) == 2.0  # the winner is ahead of both
    assert placing_points(np.array([1.0, -0.5, -0.5]), 1) == 0.5  # a loser: behind the winner, tied with the other
    assert placing_points(np.zeros(4), 2) == 1.5
    rng = np.random.default_rng(0)
    result = play_match(ThreeInARow, RandomPlayer(), RandomPlayer(), 300, rng)
    assert result.by_seat.sum(1).tolist() == [100, 100, 100] and result.pair_games == 600
    win, _, loss = result.rates()
    assert 0.2 < win < 0.45 and loss > 0.5  # one winner among three equal players
    assert 0.4 < result.pair_points / result.pair_games < 0.6  # equal players: half the pairwise points
    seen: list[str] = []

    class Named(RandomPlayer):
        def __init__(self, name: str) -> None:
            self.name = name

        def act(self, game, obs, mask, rng) -> int:
            seen.append(self.name)
            return super().act(game, obs, mask, rng)

    play_match(ThreeInARow, RandomPlayer(), [Named("a"), Named("b")], 30, rng)  # each other seat drawn from a list
    assert 0.3 < seen.count("a") / len(seen) < 0.7
    ttt = play_match(TicTacToe, RandomPlayer(), RandomPlayer(), 100, rng)  # two players: the same as the score
    assert ttt.pair_games == ttt.games and ttt.pair_points == ttt.score * ttt.games


def test_n_player_self_play_run_logs_win_rates_with_counts_and_plays_narrated(tmp_path, capsys) -> None:
    import run

    log, path = tmp_path / "log", str(tmp_path / "m.zip")
    run.main(["--alg=ppo2", "--env=ThreeInARow-v0", "--num_env=2", "--vec_env=dummy", "--num_timesteps=768",
              "--nsteps=128", "--self_play", "--snapshot_freq=256", "--eval_freq=512", "--selfplay_eval_games=12",
              "--seed=0", f"--log_path={log}", "--log_format=csv", f"--save_path={path}"])
    with open(log / "progress.csv", encoding="utf-8") as f:
        evaluated = [r for r in csv.DictReader(f) if r.get("selfplay/random_win")]
    assert evaluated
    last = evaluated[-1]
    assert float(last["selfplay/random_games"]) == 12 and float(last["selfplay/pool_games"]) >= 10
    assert np.isclose(sum(float(last[f"selfplay/random_{k}"]) for k in ("win", "draw", "loss")), 1.0)
    assert float(last["selfplay/pool_size"]) >= 3 and os.path.exists(log / "ratings.csv")
    capsys.readouterr()
    run.main(["--env=ThreeInARow-v0", "--num_timesteps=0", f"--load_path={path}", "--play", "--play_episodes=1",
              "--no_render", f"--log_path={tmp_path / 'play'}"])
    out = capsys.readouterr().out
    assert "(model) plays" in out and "player_1 (random) plays" in out
    result = next(line for line in out.splitlines() if line.startswith("result: "))
    assert all(f"player_{s} (" in result for s in range(3))


@pytest.mark.skipif(importlib.util.find_spec("rlcard") is None, reason="texas_holdem_v4 needs rlcard")
def test_texas_holdem_for_three_players() -> None:
    from common.games.pettingzoo import make_env as make_pettingzoo_env

    env = make_pettingzoo_env("pettingzoo.classic:texas_holdem_v4", num_players=3)
    assert env.num_players == 3 and env.observation_space.shape == (72,)
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    for _ in range(30):
        _finish(env, rng, info)
        _, info = env.reset()
    assert sum(env.take_outcomes()["random"]) == 30

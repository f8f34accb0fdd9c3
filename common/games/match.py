"""Games between players outside any env: evaluation of a policy against a random player, a pool of
snapshots or a perfect player, and the games that ratings are computed from. With more than two players a game
counts for ratings as one pairwise result between A and each other seat, by their placings (their totals)."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from common.games.players import Player
from common.games.self_play_env import outcome_index


@dataclasses.dataclass
class MatchResult:
    """Player A's [wins, draws, losses] for each seat it played (``by_seat[s]``), and its pairwise results
    against the other seats by placing (``pair_points`` of ``pair_games``: 1 for each seat A finished ahead
    of, 0.5 for each it tied)."""

    by_seat: np.ndarray  # [seats, 3] ints
    pair_points: float = 0.0
    pair_games: int = 0

    @property
    def totals(self) -> np.ndarray:
        """[wins, draws, losses] over all seats."""
        return self.by_seat.sum(0)

    @property
    def games(self) -> int:
        return int(self.by_seat.sum())

    def rates(self) -> tuple[float, float, float]:
        """(win, draw, loss) rates over all seats."""
        t = self.totals
        return tuple(float(x) / max(self.games, 1) for x in t)  # type: ignore[return-value]

    @property
    def worst_seat_win_rate(self) -> float:
        """A's win rate in the seat where it is lowest (seats A never played left out)."""
        played = self.by_seat.sum(1)
        return float(min((w / n for w, n in zip(self.by_seat[:, 0], played) if n), default=0.0))

    @property
    def score(self) -> float:
        """Points of A per game (win 1, draw 0.5)."""
        w, d, _ = self.totals
        return (w + 0.5 * d) / max(self.games, 1)


def placing_points(totals: np.ndarray, seat: int) -> float:
    """The pairwise points of ``seat`` in one game: 1 for each other seat with a lower total, 0.5 for each tie."""
    others = np.delete(np.asarray(totals, np.float64), seat)
    return float((totals[seat] > others).sum() + 0.5 * (totals[seat] == others).sum())


def play_game(game: Any, seated: Sequence[Player], rng: np.random.Generator, seed: int | None = None) -> np.ndarray:
    """One game with ``seated[s]`` in seat ``s``; the total reward of every seat."""
    game.reset(seed=seed)
    totals = np.zeros(game.num_players)
    over = False
    while not over:
        p = game.current_player()
        move = seated[p].act(game, game.observe(p), np.asarray(game.legal_moves(), bool), rng)
        rewards, over = game.play(move)
        totals += rewards
    return totals


def _draw(b: Player | Sequence[Player], rng: np.random.Generator) -> Player:
    return b[int(rng.integers(len(b)))] if isinstance(b, Sequence) else b


def play_match(make_game: Callable[[], Any], a: Player, b: Player | Sequence[Player], games: int,
               rng: np.random.Generator) -> MatchResult:
    """``games`` games of A against B (B in every other seat), A's seat turning with each game; when B is a
    list of players, each other seat's player is drawn from it (uniformly) for each game."""
    game = make_game()
    n = game.num_players
    by_seat = np.zeros((n, 3), np.int64)
    points = 0.0
    for g in range(games):
        seat = g % n
        seated = [a if s == seat else _draw(b, rng) for s in range(n)]
        totals = play_game(game, seated, rng, seed=int(rng.integers(2**31)))
        by_seat[seat, outcome_index(totals[seat])] += 1
        points += placing_points(totals, seat)
    return MatchResult(by_seat, points, games * (n - 1))

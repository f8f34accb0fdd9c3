"""Evaluation of a self-play learner: wins, draws and losses against a random player (deterministic moves),
on Connect Four boards against the one-step lookahead player (deterministic moves), and against the snapshot pool
(sampled moves, as in training), each with its number of games, and an Elo rating of the learner at each
evaluation from all evaluation games so far, written to ``ratings.csv`` and ``ratings.png`` in the log folder.

In a game of more than two players the learner sits in one seat (turning from game to game) and the
opponent of a match fills every other seat; a win is a positive return (finishing first). Ratings count each
game as pairwise results between the learner and each other seat by their placings (``common.games.match``)."""
from __future__ import annotations

import csv
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from algos.selfplay.pool import SnapshotPool
from algos.selfplay.snapshot import policy_weights
from common.games import connect_four
from common.games.match import MatchResult, play_match
from common.games.players import PolicyPlayer, RandomPlayer
from common.games.ratings import fit_elo
from common.logs import logger
from common.logs.log_keys import (
    SELFPLAY_ELO,
    SELFPLAY_EVAL_TIME,
    SELFPLAY_GAMES,
    SELFPLAY_LOOKAHEAD,
    SELFPLAY_POOL,
    SELFPLAY_RANDOM,
    SELFPLAY_WORST_SEAT,
)
from common.process.std_streams import write_failed

RATINGS_FILE, RATINGS_PLOT = "ratings.csv", "ratings.png"
RANDOM = "random"


class SelfPlayEvaluation:
    """Evaluates the learner with ``games`` games per opponent kind and keeps every rated game.

    The rated players are the random player (rating 0) and the learner at each evaluation, named by its env
    steps (a pool snapshot of the same steps is the same player)."""

    def __init__(self, make_game: Callable[[], Any], games: int, log_dir: str | None, seed: int | None) -> None:
        self.make_game, self.games, self.log_dir = make_game, int(games), log_dir
        self.rng = np.random.default_rng(seed)
        self.names: list[str] = [RANDOM]
        self.steps: dict[str, int] = {}
        self.results: list[tuple[int, int, float, float]] = []
        self.ratings = np.zeros(1)
        self.lookahead = connect_four.fits(make_game().observation_space)

    def _index(self, name: str) -> int:
        if name not in self.names:
            self.names.append(name)
        return self.names.index(name)

    def _rate(self, a: str, b: str, result: MatchResult) -> None:
        self.results.append((self._index(a), self._index(b), result.pair_points, float(result.pair_games)))

    def run(self, model: Any, pool: SnapshotPool, timesteps: int) -> dict[str, float]:
        """Play the evaluation games of the learner now; the values to log (``selfplay/...``)."""
        t0 = time.perf_counter()
        weights = policy_weights(model)
        me = str(int(timesteps))
        self.steps[me] = int(timesteps)
        best, sampled = PolicyPlayer(weights, True, me), PolicyPlayer(weights, False, me)
        out: dict[str, float] = {}
        vs_random = play_match(self.make_game, best, RandomPlayer(), self.games, self.rng)
        out.update(zip(SELFPLAY_RANDOM, vs_random.rates()))
        out[SELFPLAY_WORST_SEAT[RANDOM]] = vs_random.worst_seat_win_rate
        out[SELFPLAY_GAMES[RANDOM]] = vs_random.games
        self._rate(me, RANDOM, play_match(self.make_game, sampled, RandomPlayer(), self.games, self.rng))
        if self.lookahead:
            vs_lookahead = play_match(self.make_game, best, connect_four.LookaheadPlayer(), self.games, self.rng)
            out.update(zip(SELFPLAY_LOOKAHEAD, vs_lookahead.rates()))
            out[SELFPLAY_WORST_SEAT["lookahead"]] = vs_lookahead.worst_seat_win_rate
            out[SELFPLAY_GAMES["lookahead"]] = vs_lookahead.games
        others = [s for s in pool.snapshots if s.name != me]
        per = max(10, self.games // max(len(others), 1))
        totals = np.zeros(3, np.int64)
        for snap in others:
            self.steps.setdefault(snap.name, snap.timesteps)
            result = play_match(self.make_game, sampled, PolicyPlayer(snap.weights, False, snap.name), per, self.rng)
            self._rate(me, snap.name, result)
            totals += result.totals
        if others:
            out.update(zip(SELFPLAY_POOL, (totals / totals.sum()).tolist()))
            out[SELFPLAY_GAMES["pool"]] = int(totals.sum())
        self.ratings = fit_elo(self.names, self.results, anchor=0)
        out[SELFPLAY_ELO] = float(self.ratings[self.names.index(me)])
        self._write()
        out[SELFPLAY_EVAL_TIME] = time.perf_counter() - t0
        return out

    def table(self) -> list[tuple[str, int, float, int]]:
        """(name, env steps, rating, rated games) of each rated learner, by env steps."""
        games = np.zeros(len(self.names))
        for i, j, _, n in self.results:
            games[i] += n
            games[j] += n
        rows = [(name, self.steps[name], float(self.ratings[k]), int(games[k]))
                for k, name in enumerate(self.names) if name in self.steps and games[k] > 0]
        return sorted(rows, key=lambda r: r[1])

    def _write(self) -> None:
        if not self.log_dir:
            return
        rows = self.table()
        try:
            with open(os.path.join(self.log_dir, RATINGS_FILE), "w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                w.writerow(["snapshot", "timesteps", "elo", "games"])
                w.writerows([(n, t, round(r, 1), g) for n, t, r, g in rows])
        except OSError as e:
            write_failed(f"{RATINGS_FILE} in {self.log_dir}", e)
            return
        try:
            from common.logs.plot_util import plot_ratings

            plot_ratings([r[1] for r in rows], [r[2] for r in rows], os.path.join(self.log_dir, RATINGS_PLOT))
        except (ImportError, OSError, ValueError) as e:
            logger.warn(f"{RATINGS_PLOT} not written: {e}")

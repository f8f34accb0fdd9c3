"""Connect Four read from its observation, and the one-step lookahead player (the issue's reference opponent).

The observation is PettingZoo's ``connect_four_v3`` one (``AECGame.observe``): rows x columns x 2 planes from
the mover's side, plane 0 the mover's pieces and plane 1 the opponent's, row 0 at the top; a piece dropped in a
column lands in its lowest empty row. Any game with such observations and one move per column can use it.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

CONNECT = 4  # pieces in a line that win
DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))  # right, down, down-right, down-left (each also backwards)


def fits(observation_space: gym.Space) -> bool:
    """Whether observations of ``observation_space`` are boards this module reads (rows x columns x 2)."""
    shape = getattr(observation_space, "shape", None) or ()
    return len(shape) == 3 and shape[2] == 2 and max(shape[0], shape[1]) >= CONNECT


def landing_row(occupied: np.ndarray, column: int) -> int:
    """The row a piece dropped in ``column`` lands in (the lowest empty one), or -1 when the column is full."""
    empty = np.flatnonzero(~occupied[:, column])
    return int(empty[-1]) if len(empty) else -1


def completes_line(pieces: np.ndarray, row: int, column: int, connect: int = CONNECT) -> bool:
    """Whether a piece at (``row``, ``column``) joins ``pieces`` (bool rows x columns) in a line of ``connect``."""
    rows, columns = pieces.shape
    for dr, dc in DIRECTIONS:
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, column + sign * dc
            while 0 <= r < rows and 0 <= c < columns and pieces[r, c]:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= connect:
            return True
    return False


def winning_moves(pieces: np.ndarray, others: np.ndarray, mask: np.ndarray) -> list[int]:
    """The columns among ``mask``'s where a piece of ``pieces``' owner completes a line now."""
    occupied = pieces | others
    wins = []
    for column in np.flatnonzero(mask):
        row = landing_row(occupied, int(column))
        if row >= 0 and completes_line(pieces, row, int(column)):
            wins.append(int(column))
    return wins


class LookaheadPlayer:
    """One-step lookahead: a winning move when it has one, else a move onto a column where the opponent
    would win next (a block), else a random legal move; ties drawn at random."""

    name = "lookahead"

    def act(self, game: Any, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        mine, theirs = np.asarray(obs)[..., 0] > 0, np.asarray(obs)[..., 1] > 0
        mask = np.asarray(mask, bool)
        for pieces, others in ((mine, theirs), (theirs, mine)):
            moves = winning_moves(pieces, others, mask)
            if moves:
                return int(rng.choice(moves))
        return int(rng.choice(np.flatnonzero(mask)))

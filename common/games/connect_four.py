"""Connect Four read from its observation, and the one-step lookahead player (the issue's reference opponent).

The observation is PettingZoo's ``connect_four_v3`` one (``AECGame.observe``): rows x columns x 2 planes from
the mover's side, plane 0 the mover's pieces and plane 1 the opponent's, row 0 at the top; a piece dropped in a
column lands in its lowest empty row. Any game with such observations and one move per column can use it.
"""
from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np

CONNECT = 4  # pieces in a line that win
DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))  # right, down, down-right, down-left (each also backwards)


def fits(observation_space: gym.Space) -> bool:
    """Whether observations of ``observation_space`` are boards this module reads (rows x columns x 2)."""
    shape = getattr(observation_space, "shape", None) or ()
    return len(shape) == 3 and shape[2] == 2 and max(shape[0], shape[1]) >= CONNECT


@functools.lru_cache(maxsize=8)
def lines_of(rows: int, columns: int, connect: int = CONNECT) -> np.ndarray:
    """Flat cell indices (row * columns + column) of every line of ``connect`` cells on a board, [lines, connect]."""
    lines = []
    for r in range(rows):
        for c in range(columns):
            for dr, dc in DIRECTIONS:
                cells = [(r + k * dr, c + k * dc) for k in range(connect)]
                if all(0 <= rr < rows and 0 <= cc < columns for rr, cc in cells):
                    lines.append([rr * columns + cc for rr, cc in cells])
    return np.array(lines, np.intp).reshape(-1, connect)


def winning_moves(pieces: np.ndarray, others: np.ndarray, mask: np.ndarray) -> list[int]:
    """The columns among ``mask``'s where a piece of ``pieces``' owner completes a line now (ascending): lines of
    ``CONNECT`` cells with all but one held by ``pieces`` and the last one where a piece dropped now lands."""
    rows, columns = pieces.shape
    empty = ~(pieces | others)
    landing = rows - 1 - np.argmax(empty[::-1], axis=0)  # each column's lowest empty row
    playable_columns = np.flatnonzero(np.asarray(mask, bool) & empty.any(axis=0))
    playable = np.zeros(rows * columns, bool)
    playable[landing[playable_columns] * columns + playable_columns] = True
    lines = lines_of(rows, columns)
    open_cells = playable[lines]
    completing = (pieces.ravel()[lines].sum(axis=1) == CONNECT - 1) & open_cells.any(axis=1)
    return sorted(set((lines[completing][open_cells[completing]] % columns).tolist()))


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

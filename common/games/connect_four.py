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


def fits(observation_space: gym.Space) -> bool:
    """Whether observations of ``observation_space`` are boards this module reads (rows x columns x 2)."""
    shape = getattr(observation_space, "shape", None) or ()
    return len(shape) == 3 and shape[2] == 2 and max(shape[0], shape[1]) >= CONNECT


@functools.lru_cache(maxsize=8)
def _bit_layout(rows: int, columns: int) -> tuple[np.ndarray, int, int, int, tuple[int, ...]]:
    """A bitboard layout: each column one run of ``rows`` bits from the bottom up and one always-empty bit above
    it (so no line wraps from one column into the next). Returns the bit of each cell (row-major, row 0 at the
    top), the bit count, the bottom bit of every column, all board bits, and each column's bits."""
    height = rows + 1
    row, column = np.divmod(np.arange(rows * columns), columns)
    full_column = (1 << rows) - 1
    return (column * height + (rows - 1 - row), columns * height, sum(1 << (c * height) for c in range(columns)),
            sum(full_column << (c * height) for c in range(columns)),
            tuple(full_column << (c * height) for c in range(columns)))


def _bitboard(cells: np.ndarray, bit_of_cell: np.ndarray, size: int) -> int:
    """The cells (rows x columns, True where a piece is) as a Python int in the ``_bit_layout``."""
    flat = np.zeros(size, bool)
    flat[bit_of_cell] = np.asarray(cells, bool).ravel()
    return int.from_bytes(np.packbits(flat, bitorder="little").tobytes(), "little")


@functools.lru_cache(maxsize=8)
def _plane_bits(rows: int, columns: int) -> np.ndarray:
    """For each entry of a flattened rows x columns x 2 observation, its bit in two ``_bit_layout`` boards laid
    one after the other (plane 0, then plane 1)."""
    bit_of_cell, size = _bit_layout(rows, columns)[:2]
    return (bit_of_cell[:, None] + np.array([0, size])[None, :]).ravel()


def _winning_columns(mine: int, taken: int, rows: int, columns: int, mask: np.ndarray) -> list[int]:
    """The columns among ``mask``'s where the owner of bitboard ``mine`` completes a line of four now (cells with
    three of its pieces next to them in one direction: shifts by 1 vertical, rows + 1 horizontal, rows + 2 and
    rows the diagonals, kept where a piece dropped now lands; ``taken``: all pieces)."""
    bottoms, board, column_bits = _bit_layout(rows, columns)[2:]
    landing = (taken + bottoms) & ~taken & board  # each column's lowest empty cell
    completing = (mine << 1) & (mine << 2) & (mine << 3)  # three below (nothing rests above a landing cell)
    for shift in (rows + 1, rows + 2, rows):
        pair = (mine << shift) & (mine << 2 * shift)
        completing |= pair & ((mine << 3 * shift) | (mine >> shift))
        pair = (mine >> shift) & (mine >> 2 * shift)
        completing |= pair & ((mine >> 3 * shift) | (mine << shift))
    wins = completing & landing
    return [c for c in range(columns) if wins & column_bits[c] and mask[c]] if wins else []


def winning_moves(pieces: np.ndarray, others: np.ndarray, mask: np.ndarray) -> list[int]:
    """The columns among ``mask``'s where a piece of ``pieces``' owner completes a line of four now (ascending),
    on a board whose pieces rest on the ones below (bitboards: ``_winning_columns``)."""
    rows, columns = pieces.shape
    bit_of_cell, size = _bit_layout(rows, columns)[:2]
    mine = _bitboard(pieces, bit_of_cell, size)
    return _winning_columns(mine, mine | _bitboard(others, bit_of_cell, size), rows, columns, mask)


class LookaheadPlayer:
    """One-step lookahead: a winning move when it has one, else a move onto a column where the opponent
    would win next (a block), else a random legal move; ties drawn at random."""

    name = "lookahead"

    def act(self, game: Any, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        obs = np.asarray(obs)
        rows, columns = obs.shape[:2]
        flat = np.zeros(2 * _bit_layout(rows, columns)[1], bool)
        flat[_plane_bits(rows, columns)] = obs.ravel() > 0
        both = int.from_bytes(np.packbits(flat, bitorder="little").tobytes(), "little")  # both planes' bitboards
        mine, theirs = both & ((1 << (len(flat) // 2)) - 1), both >> (len(flat) // 2)
        mask = np.asarray(mask, bool)
        for pieces in (mine, theirs):
            moves = _winning_columns(pieces, mine | theirs, rows, columns, mask)
            if moves:
                return int(rng.choice(moves))
        return int(rng.choice(np.flatnonzero(mask)))

"""Connect Four read from its observation, and the one-step lookahead player (the issue's reference opponent).

The observation is PettingZoo's ``connect_four_v3`` one (``AECGame.observe``): rows x columns x 2 planes from
the mover's side, plane 0 the mover's pieces and plane 1 the opponent's, row 0 at the top; a piece dropped in a
column lands in its lowest empty row. Any game with such observations and one move per column can use it.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

CONNECT = 4  # pieces in a line that win


def fits(observation_space: gym.Space) -> bool:
    """Whether observations of ``observation_space`` are boards this module reads (rows x columns x 2)."""
    shape = getattr(observation_space, "shape", None) or ()
    return len(shape) == 3 and shape[2] == 2 and max(shape[0], shape[1]) >= CONNECT


class BitLayout(NamedTuple):
    """A bitboard layout: each column one run of ``rows`` bits from the bottom up and one always-empty bit above
    it (so no line wraps from one column into the next)."""

    bit_of_cell: np.ndarray  # the bit of each cell, row-major with row 0 at the top
    size: int  # bits of one board
    bottoms: int  # the bottom bit of every column
    board: int  # all cell bits
    column_bits: tuple[int, ...]  # each column's bits
    plane_bits: np.ndarray  # each entry of a flattened rows x columns x 2 observation: its bit in two boards
    #                         laid one after the other (plane 0, then plane 1)


@functools.lru_cache(maxsize=8)
def _bit_layout(rows: int, columns: int) -> BitLayout:
    """The ``BitLayout`` of a rows x columns board."""
    height = rows + 1
    row, column = np.divmod(np.arange(rows * columns), columns)
    bit_of_cell, size, full_column = column * height + (rows - 1 - row), columns * height, (1 << rows) - 1
    column_bits = tuple(full_column << (c * height) for c in range(columns))
    return BitLayout(bit_of_cell, size, sum(1 << (c * height) for c in range(columns)), sum(column_bits),
                     column_bits, (bit_of_cell[:, None] + np.array([0, size])[None, :]).ravel())


def _pack(values: np.ndarray, bits: np.ndarray, size: int) -> int:
    """A Python int with bit ``bits[i]`` set where ``values[i]`` is true (``size`` bits in all)."""
    flat = np.zeros(size, bool)
    flat[bits] = values
    return int.from_bytes(np.packbits(flat, bitorder="little").tobytes(), "little")


def _winning_columns(mine: int, taken: int, rows: int, columns: int, mask: np.ndarray) -> list[int]:
    """The columns among ``mask``'s where the owner of bitboard ``mine`` completes a line of four now (cells with
    three of its pieces next to them in one direction: shifts by 1 vertical, rows + 1 horizontal, rows + 2 and
    rows the diagonals, kept where a piece dropped now lands; ``taken``: all pieces)."""
    layout = _bit_layout(rows, columns)
    landing = (taken + layout.bottoms) & ~taken & layout.board  # each column's lowest empty cell
    completing = (mine << 1) & (mine << 2) & (mine << 3)  # three below (nothing rests above a landing cell)
    for shift in (rows + 1, rows + 2, rows):
        pair = (mine << shift) & (mine << 2 * shift)
        completing |= pair & ((mine << 3 * shift) | (mine >> shift))
        pair = (mine >> shift) & (mine >> 2 * shift)
        completing |= pair & ((mine >> 3 * shift) | (mine << shift))
    wins = completing & landing
    return [c for c in range(columns) if wins & layout.column_bits[c] and mask[c]] if wins else []


def winning_moves(pieces: np.ndarray, others: np.ndarray, mask: np.ndarray) -> list[int]:
    """The columns among ``mask``'s where a piece of ``pieces``' owner completes a line of four now (ascending),
    on a board whose pieces rest on the ones below (bitboards: ``_winning_columns``)."""
    rows, columns = pieces.shape
    layout = _bit_layout(rows, columns)
    mine = _pack(np.asarray(pieces, bool).ravel(), layout.bit_of_cell, layout.size)
    taken = mine | _pack(np.asarray(others, bool).ravel(), layout.bit_of_cell, layout.size)
    return _winning_columns(mine, taken, rows, columns, mask)


class LookaheadPlayer:
    """One-step lookahead: a winning move when it has one, else a move onto a column where the opponent
    would win next (a block), else a random legal move; ties drawn at random."""

    name = "lookahead"

    def act(self, game: Any, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        obs = np.asarray(obs)
        rows, columns = obs.shape[:2]
        layout = _bit_layout(rows, columns)
        both = _pack(obs.ravel() > 0, layout.plane_bits, 2 * layout.size)  # both planes' bitboards in one pass
        mine, theirs = both & ((1 << layout.size) - 1), both >> layout.size
        mask = np.asarray(mask, bool)
        for pieces in (mine, theirs):
            moves = _winning_columns(pieces, mine | theirs, rows, columns, mask)
            if moves:
                return int(rng.choice(moves))
        return int(rng.choice(np.flatnonzero(mask)))

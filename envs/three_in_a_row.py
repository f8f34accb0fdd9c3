"""Three in a row for ``num_players`` players (3 or 4; 2 works too) as a game of ``common.games.protocol``, and
the registered single-agent view "ThreeInARow-v0" (``SelfPlayEnv``: one seat for the learner, random players
in the others unless the trainer seats others; ``--env_kwargs=num_players=4``).

The board is ``size`` x ``size`` cells (default ``num_players + 1``), numbered row by row; the players take
turns, seat 0 first, each placing a mark on an empty cell. Whoever first has three marks in a line (a row,
a column or a diagonal) wins: +1 for the winner, -1 / (num_players - 1) for each other player; a full board
with no line is a draw (0 for all). Random play loses to a player who completes its own lines and blocks
the next player's.

An observation is ``num_players`` planes of ``size * size`` floats, from the mover's side: its own marks
first, then those of the player after it, and so on around the table. The legal moves are the empty cells.
"""
from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np

from common.games.self_play_env import SelfPlayEnv

LINE = 3  # marks in a line that win
MARKS = "XOAB"  # a mark per seat in ``render_text`` (seats beyond: digits)


@functools.lru_cache(maxsize=8)
def lines_of(size: int) -> np.ndarray:
    """Every line of three cells on a size x size board, [lines, 3] cell numbers."""
    grid = np.arange(size * size).reshape(size, size)
    out = []
    for r in range(size):
        for c in range(size):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                end_r, end_c = r + dr * (LINE - 1), c + dc * (LINE - 1)
                if 0 <= end_r < size and 0 <= end_c < size:
                    out.append([grid[r + dr * k, c + dc * k] for k in range(LINE)])
    return np.array(out, np.int64)


class ThreeInARow:
    """Three in a row for ``num_players`` seats on a ``size`` x ``size`` board (the game protocol)."""

    def __init__(self, num_players: int = 3, size: int | None = None) -> None:
        if not 2 <= int(num_players) <= 9:
            raise ValueError(f"num_players must be 2 to 9, got {num_players}")
        self.num_players = int(num_players)
        self.size = int(size) if size is not None else self.num_players + 1
        if self.size < LINE:
            raise ValueError(f"size must be at least {LINE}, got {self.size}")
        self.cells = self.size * self.size
        self.agents = [f"player_{s}" for s in range(self.num_players)]
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.num_players * self.cells,), np.float32)
        self.action_space = gym.spaces.Discrete(self.cells)
        self._lines = lines_of(self.size)
        self._lines_through = [self._lines[(self._lines == cell).any(1)] for cell in range(self.cells)]
        self.board = np.full(self.cells, -1, np.int64)  # the seat whose mark is on each cell, -1 empty
        self.moves, self.winner = 0, -1

    def reset(self, seed: int | None = None) -> None:
        self.board[:] = -1
        self.moves, self.winner = 0, -1

    def current_player(self) -> int:
        return self.moves % self.num_players

    def observe(self, player: int) -> np.ndarray:
        seats = (player + np.arange(self.num_players)) % self.num_players  # the mover first, then around the table
        return (self.board[None, :] == seats[:, None]).astype(np.float32).ravel()

    def legal_moves(self) -> np.ndarray:
        return self.board < 0

    def play(self, action: int) -> tuple[np.ndarray, bool]:
        seat = self.current_player()
        if self.winner >= 0 or not 0 <= action < self.cells or self.board[action] >= 0:
            raise ValueError(f"illegal move {action} in\n{self.render_text()}")
        self.board[action] = seat
        self.moves += 1
        rewards = np.zeros(self.num_players)
        if (self.board[self._lines_through[action]] == seat).all(1).any():
            self.winner = seat
            rewards[:] = -1.0 / (self.num_players - 1)
            rewards[seat] = 1.0
        return rewards, self.winner >= 0 or self.moves == self.cells

    def render_text(self) -> str:
        marks = [MARKS[s] if s < len(MARKS) else str(s) for s in range(self.num_players)]
        rows = [" ".join(marks[m] if m >= 0 else "." for m in self.board[r * self.size:(r + 1) * self.size])
                for r in range(self.size)]
        legend = ", ".join(f"{mark}: {agent}" for mark, agent in zip(marks, self.agents))
        return "\n".join([*rows, legend])


def make_env(num_players: int = 3, size: int | None = None, render_mode: str | None = None,
             **kwargs: Any) -> SelfPlayEnv:
    """The "ThreeInARow-v0" env: ``SelfPlayEnv`` around ``ThreeInARow(num_players, size)``."""
    return SelfPlayEnv(functools.partial(ThreeInARow, num_players, size), render_mode=render_mode, **kwargs)

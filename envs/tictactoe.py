"""Tic-tac-toe as a game of ``common.games.protocol``, a perfect (minimax) player, and the registered
single-agent view "TicTacToe-v0" (``SelfPlayEnv``: the learner against a random player unless the trainer
seats others).

Cells are numbered 0..8 row by row. Seat 0 plays X and moves first. An observation is 18 floats from the
mover's point of view: 9 cells holding the observer's marks, then 9 holding the opponent's. The winner gets
+1 and the loser -1 on the last move; a draw gives 0 to both.
"""
from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np

from common.games.self_play_env import SelfPlayEnv

LINES = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]])
_LINES_T = [tuple(int(i) for i in line) for line in LINES]
_GRID = np.arange(9).reshape(3, 3)
# for each non-identity symmetry of the board: the cell each cell of the transformed board comes from
_SYMMETRY_SOURCES = [t.ravel() for t in (np.rot90(_GRID, 1), np.rot90(_GRID, 2), np.rot90(_GRID, 3), _GRID.T,
                                         np.fliplr(_GRID), np.flipud(_GRID), np.rot90(_GRID, 2).T)]


def _winner(board: tuple[int, ...]) -> int:
    """1 or 2 when that mark completed a line, else 0 (``board`` holds 0 empty, 1 X, 2 O)."""
    for a, b, c in _LINES_T:
        if board[a] and board[a] == board[b] == board[c]:
            return board[a]
    return 0


class TicTacToe:
    """Tic-tac-toe for two seats (the game protocol)."""

    num_players = 2
    observation_space = gym.spaces.Box(0.0, 1.0, (18,), np.float32)
    action_space = gym.spaces.Discrete(9)

    def __init__(self) -> None:
        self.board = [0] * 9
        self.moves = 0
        self.winner = 0

    def reset(self, seed: int | None = None) -> None:
        self.board, self.moves, self.winner = [0] * 9, 0, 0

    def current_player(self) -> int:
        return self.moves % 2

    def observe(self, player: int) -> np.ndarray:
        b = np.asarray(self.board)
        return np.concatenate([b == player + 1, b == 2 - player]).astype(np.float32)

    def legal_moves(self) -> np.ndarray:
        return np.asarray(self.board) == 0

    def play(self, action: int) -> tuple[np.ndarray, bool]:
        mark = self.moves % 2 + 1
        if self.winner or self.board[action]:
            raise ValueError(f"illegal move {action} in\n{self.render_text()}")
        self.board[action] = mark
        self.moves += 1
        self.winner = _winner(tuple(self.board))
        rewards = np.zeros(2)
        if self.winner:
            rewards[mark - 1], rewards[2 - mark] = 1.0, -1.0
        return rewards, bool(self.winner) or self.moves == 9

    @staticmethod
    def symmetries() -> list[tuple[np.ndarray, np.ndarray]]:
        """The board's seven rotations and reflections (the identity left out) as (observation index, action
        map) pairs: the transformed observation is ``obs[index]`` and a move to cell ``a`` becomes ``map[a]``."""
        return [(np.concatenate([source, source + 9]), np.argsort(source)) for source in _SYMMETRY_SOURCES]

    def render_text(self) -> str:
        cells = [" XO"[m] if m else str(i) for i, m in enumerate(self.board)]
        return "\n---+---+---\n".join(" " + " | ".join(cells[r * 3:r * 3 + 3]) for r in range(3))


@functools.cache
def minimax_values(board: tuple[int, ...]) -> tuple[int, ...]:
    """The value of each move for the player to move (+1 win, 0 draw, -1 loss under perfect play; -2 for
    an occupied cell). The board must not be finished."""
    moves = sum(1 for m in board if m)
    mark = moves % 2 + 1
    values = []
    for a in range(9):
        if board[a]:
            values.append(-2)
            continue
        after = board[:a] + (mark,) + board[a + 1:]
        if _winner(after):
            values.append(1)
        elif moves + 1 == 9:
            values.append(0)
        else:
            values.append(-max(minimax_values(after)))
    return tuple(values)


class MinimaxPlayer:
    """A perfect tic-tac-toe player: one of the moves with the best minimax value, drawn at random."""

    name = "minimax"

    def act(self, game: Any, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        values = np.asarray(minimax_values(tuple(game.board)))
        return int(rng.choice(np.flatnonzero(values == values.max())))


def make_env(render_mode: str | None = None, **kwargs: Any) -> SelfPlayEnv:
    """The "TicTacToe-v0" env: ``SelfPlayEnv`` around ``TicTacToe``."""
    return SelfPlayEnv(TicTacToe, render_mode=render_mode, **kwargs)

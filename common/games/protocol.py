"""The game protocol: what a turn-based game of ``num_players`` players offers, so that the runner can seat a
learner and opponents at it (``common.games.self_play_env.SelfPlayEnv``).

A game is any object with these members (``typing.Protocol``; no base class needed)::

    num_players: int                      # 2 for board games; seats are 0 .. num_players - 1
    observation_space: gymnasium.spaces.Box   # what ``observe`` returns
    action_space: gymnasium.spaces.Discrete   # the moves
    def reset(self, seed: int | None = None) -> None        # a new game; seat 0 moves first
    def current_player(self) -> int                          # the seat to move
    def observe(self, player: int) -> np.ndarray             # the position as ``player`` sees it
    def legal_moves(self) -> np.ndarray                      # bool mask over ``action_space`` for the mover
    def play(self, action: int) -> tuple[np.ndarray, bool]   # the mover plays a legal move:
                                                             #   (reward of every seat for this move, game over)
    def render_text(self) -> str                             # the position as text (``--opponent=human``)
    agents: list[str]                     # optional: each seat's name (default player_0, player_1, ...)

Observations should be drawn from the point of view of the player they are for (own pieces apart from the
opponent's), so that one policy can play every seat. Rewards are usually +1 / -1 to the winner / loser on the
last move and 0 otherwise; a seat's reward is what it received since its previous move.
``envs/tictactoe.py`` is a complete example.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import gymnasium as gym
import numpy as np


@runtime_checkable
class Game(Protocol):
    """A turn-based game of ``num_players`` seats (see the module's docstring)."""

    num_players: int
    observation_space: gym.spaces.Space
    action_space: gym.spaces.Space

    def reset(self, seed: int | None = None) -> None: ...

    def current_player(self) -> int: ...

    def observe(self, player: int) -> np.ndarray: ...

    def legal_moves(self) -> np.ndarray: ...

    def play(self, action: int) -> tuple[np.ndarray, bool]: ...

    def render_text(self) -> str: ...


def check_game(game: object) -> Game:
    """``game`` when it offers the protocol with a Discrete action space; TypeError naming what is missing."""
    missing = [name for name in ("num_players", "observation_space", "action_space", "reset", "current_player",
                                 "observe", "legal_moves", "play", "render_text") if not hasattr(game, name)]
    if missing:
        raise TypeError(f"{type(game).__name__} is not a game (common.games.protocol): it lacks {', '.join(missing)}")
    if not isinstance(game.action_space, gym.spaces.Discrete):  # type: ignore[attr-defined]
        raise TypeError(f"{type(game).__name__}: games need a Discrete action space, "
                        f"got {game.action_space}")  # type: ignore[attr-defined]
    return game  # type: ignore[return-value]


def seat_names(game: object) -> list[str]:
    """The name of each seat of ``game``: its ``agents`` when it has them, else player_0, player_1, ..."""
    agents = getattr(game, "agents", None)
    n = int(game.num_players)  # type: ignore[attr-defined]
    return [str(a) for a in agents] if agents is not None and len(agents) == n else [f"player_{s}" for s in range(n)]

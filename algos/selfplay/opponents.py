"""The opponent of ``--play`` against a game env: ``random``, ``human`` (moves typed at the terminal),
``lookahead`` (Connect Four boards: wins, blocks, else random) or a model file, whose policy plays its best
moves from a numpy copy; and the narration of ``--play`` for games of more than two players (each move by the
mover's agent name, each game's result per seat)."""
from __future__ import annotations

import os
from typing import Any

from algos.selfplay.hook import game_maker
from common.errors import UserError
from common.games import connect_four
from common.games.players import HumanPlayer, Player, PolicyPlayer, RandomPlayer
from common.vec_env import EnvWorkerError


class OpponentError(UserError):
    """``--opponent`` names no player, or the env is not a game."""


def opponent_player(spec: str, games: int = 0) -> Player:
    """The player ``--opponent=spec`` names: "random", "human" (asked for ``games`` games, 0: no limit),
    "lookahead" or a model file (its deterministic moves)."""
    if spec == "random":
        return RandomPlayer()
    if spec == "human":
        return HumanPlayer(games=games)
    if spec == "lookahead":
        return connect_four.LookaheadPlayer()
    if not os.path.isfile(spec):
        raise OpponentError(f"--opponent={spec}: not random, human or a model file (nor lookahead, for Connect Four)")
    from algos.base import load_model
    from algos.selfplay.snapshot import policy_weights

    return PolicyPlayer(policy_weights(load_model(spec)), deterministic=True, name=os.path.basename(spec))


def seat_opponent(env: Any, spec: str, games: int = 0) -> None:
    """Make ``--opponent=spec`` play the other seats of every game of ``env`` (a vec env of ``SelfPlayEnv``);
    ``games``: the games to play (``--play_episodes``; 0: no limit), after which a person is asked no more."""
    try:
        game_maker(env)
    except UserError:
        raise OpponentError(f"--opponent={spec} needs a game env (such as TicTacToe-v0)") from None
    if spec == "lookahead" and not connect_four.fits(env.observation_space):
        raise OpponentError(f"--opponent=lookahead plays Connect Four boards (rows x columns x 2 observations), "
                            f"not {env.observation_space}")
    env.env_method("set_opponent", opponent_player(spec, games))


def narrate_games(env: Any) -> None:
    """When ``env`` (a vec env) plays a game of more than two players, have it print each move by the mover's
    agent name and each game's result per seat (``SelfPlayEnv.set_narration``); other envs are left alone."""
    try:
        players = env.get_attr("num_players", indices=[0])[0]
        env.get_attr("set_narration", indices=[0])
    except (AttributeError, EnvWorkerError):
        return
    if isinstance(players, int) and players > 2:
        env.env_method("set_narration", True)

"""``SelfPlayEnv``: a game (``common.games.protocol``) seen by one learner as an ordinary single-agent
gymnasium env. The learner sits in one seat, which turns over episodes (first player, second player,
...); the other seats are played, inside this env (so inside the vec-env workers), by opponents: a fixed
player (random by default, a model, a person) at every other seat, or policies drawn per episode and seat
from a pool of numpy weight copies that the trainer sends with ``env_method("set_opponent_pool", ...)``.

The learner's legal moves are in ``info["action_mask"]`` and ``action_masks()``; an illegal move ends the
episode as a loss (reward ``illegal_move_reward``). Each finished episode records its outcome (win, draw,
loss by the sign of the learner's return) once against each opponent name at the table; ``take_outcomes()``
hands them over. A game that ends before the learner's first move (in a game of more than two players) is
not an episode: ``reset`` starts another. With ``set_narration(True)`` (``--play`` of games of more than two
players) each move is printed with the mover's agent name, and each game's end with the result of every seat.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from common.games.players import Player, PolicyPlayer, PolicyWeights, RandomPlayer
from common.games.protocol import Game, check_game, seat_names

OUTCOMES = ("win", "draw", "loss")
_RANDOM = RandomPlayer()
MAX_RESTARTS = 1000  # games in a row that may end before the learner's first move (reset then gives up)


def outcome_index(learner_return: float) -> int:
    """0 win, 1 draw, 2 loss, by the sign of the learner's return."""
    return 0 if learner_return > 0 else 2 if learner_return < 0 else 1


class SelfPlayEnv(gym.Env):
    """One seat of ``make_game()`` for the learner, the others for opponents.

    Args:
        make_game: builds the game (kept, so a copy of the game can be made elsewhere: ``get_attr("make_game")``).
        opponent: the player of the other seats until a pool is set (default: ``RandomPlayer``).
        illegal_move_reward: the learner's reward for an illegal move, which ends the episode.
        render_mode: "ansi" (``render()`` returns the position as text) or "human" (prints it).
    """

    metadata: ClassVar[dict] = {"render_modes": ["ansi", "human"]}

    def __init__(self, make_game: Callable[[], Any], opponent: Player | None = None,
                 illegal_move_reward: float = -1.0, render_mode: str | None = None) -> None:
        self.make_game = make_game
        self.game: Game = check_game(make_game())
        self.num_players = int(self.game.num_players)
        self.observation_space, self.action_space = self.game.observation_space, self.game.action_space
        self.opponent: Player = opponent or RandomPlayer()
        self.illegal_move_reward = float(illegal_move_reward)
        self.render_mode = render_mode
        self.pool: list[PolicyPlayer] = []
        self.pool_probs: np.ndarray | None = None
        self.fixed_share = self.random_first_move = self.random_opening = 0.0
        self.shared_players: list[tuple[Player, float]] = []
        self._random_opponent_move = False  # this episode's first opponent move is random (random_first_move)
        self.seat = 0
        self.seated: list[Player | None] = [None] * self.num_players
        self.outcomes: dict[str, list[int]] = {}
        self.illegal_moves = 0  # the learner's illegal moves so far (none when its actions are masked)
        self._episodes, self._seat_offset = 0, 0
        self._totals = np.zeros(self.num_players)
        self._over = self._recorded = True
        self.narrate = False

    # ------------------------------------------------------------------ opponents (called through the vec env)

    def set_opponent(self, player: Player | None) -> None:
        """Play every other seat with ``player`` from the next episode (None: a random player); drops the pool."""
        self.opponent, self.pool, self.pool_probs = player or RandomPlayer(), [], None
        self.fixed_share = self.random_first_move = self.random_opening = 0.0
        self.shared_players = []

    def set_opponent_pool(self, pool: Sequence[tuple[str, PolicyWeights]], probs: Sequence[float] | None = None,
                          deterministic: bool = False, fixed_share: float = 0.0, epsilon: float = 0.0,
                          random_first_move: float = 0.0, players: Sequence[tuple[Player, float]] = (),
                          random_opening: float = 0.0) -> None:
        """From the next episode, each other seat is played by a policy of ``pool`` ((name, weights) pairs),
        drawn per episode with ``probs`` (default uniform), or in a ``fixed_share`` of the episodes by the
        fixed opponent (``set_opponent``; random by default). Pool policies play a random move in a share
        ``epsilon`` of their moves, and the opponents' first move of an episode is random in a share
        ``random_first_move`` of the episodes (varied openings, then strong play); in a share
        ``random_opening`` the game's first move, whoever's it is (the learner's too), is played at random before
        the learner's first observation (for games that no first move ends). ``players`` are
        (player, share) pairs: each plays that share of the episodes, drawn before the rest."""
        if not all(0.0 <= x <= 1.0 for x in (fixed_share, epsilon, random_first_move, random_opening)):
            raise ValueError(f"fixed_share, epsilon, random_first_move and random_opening must be in [0, 1], got "
                             f"{fixed_share}, {epsilon}, {random_first_move}, {random_opening}")
        if any(share < 0 for _, share in players) or sum(share for _, share in players) > 1:
            raise ValueError(f"the players' shares must be >= 0 and sum to at most 1, got "
                             f"{[share for _, share in players]}")
        self.shared_players = [(player, float(share)) for player, share in players]
        self.random_first_move, self.random_opening = float(random_first_move), float(random_opening)
        self.pool = [PolicyPlayer(w, deterministic, name, epsilon) for name, w in pool]
        self.fixed_share = float(fixed_share)
        self.set_pool_probs(probs)

    def set_pool_probs(self, probs: Sequence[float] | None) -> None:
        """The chance of each pool policy to be drawn (normalised; None: uniform)."""
        if probs is None or not self.pool:
            self.pool_probs = None
            return
        p = np.asarray(probs, np.float64)
        if p.shape != (len(self.pool),) or (p < 0).any() or p.sum() <= 0:
            raise ValueError(f"pool probabilities {list(p)} do not fit a pool of {len(self.pool)}")
        self.pool_probs = p / p.sum()

    def set_narration(self, on: bool) -> None:
        """Print every move by the mover's agent name and every game's result per seat (``--play``)."""
        self.narrate = bool(on)

    def take_outcomes(self) -> dict[str, list[int]]:
        """The learner's [wins, draws, losses] per opponent name since the last call, then forgets them."""
        out, self.outcomes = self.outcomes, {}
        return out

    def _draw_opponents(self) -> list[Player | None]:
        """This episode's player of each seat (None: the learner's): a shared player or the fixed opponent at
        every other seat (drawn once for the episode), else a pool policy drawn for each seat."""
        fixed = self._draw_fixed()
        return [None if s == self.seat else fixed if fixed is not None else
                self.pool[int(self.np_random.choice(len(self.pool), p=self.pool_probs))]
                for s in range(self.num_players)]

    def _draw_fixed(self) -> Player | None:
        """The player of every other seat this episode when it is not the pool's (a shared player by its share,
        the fixed opponent without a pool or in ``fixed_share`` of the episodes), else None."""
        if self.shared_players:
            u = self.np_random.random()
            for player, share in self.shared_players:
                if u < share:
                    return player
                u -= share
        if not self.pool or (self.fixed_share and self.np_random.random() < self.fixed_share):
            return self.opponent
        return None

    # ------------------------------------------------------------------ gymnasium

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:  # envs seeded seed, seed + 1, ... start in different seats
            self._seat_offset, self._episodes = seed % self.num_players, 0
        self.seat = (self._seat_offset + self._episodes) % self.num_players
        self._episodes += 1
        for _ in range(MAX_RESTARTS):
            self._start_game()
            if not self._over:
                return self._observation(), self._info()
            self._end(record=False)  # over before the learner's turn (all others folded, say): not an episode
        raise RuntimeError(f"{MAX_RESTARTS} games in a row ended before seat {self.seat} had a move")

    def _start_game(self) -> None:
        """A new game with this episode's seat, up to the learner's first move (or the game's end)."""
        self.game.reset(seed=int(self.np_random.integers(2**31)))
        self.seated = self._draw_opponents()
        if self.narrate:
            print(f"new game: {self._table()}", flush=True)
        self._totals[:] = 0.0
        self._random_opponent_move = (bool(self.random_first_move)
                                      and self.np_random.random() < self.random_first_move)
        self._over = self._recorded = False
        if self.random_opening and self.np_random.random() < self.random_opening:
            move = _RANDOM.act(self.game, None, np.asarray(self.game.legal_moves(), bool), self.np_random)
            self._tell_move(self.game.current_player(), move, "random opening")
            rewards, over = self.game.play(move)
            self._totals += rewards
            self._over = bool(over)
        self._opponents_move()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self._over:
            raise RuntimeError("step() after the game ended; call reset()")
        game, seat = self.game, self.seat
        before = self._totals[seat]
        action = int(np.asarray(action).reshape(()))
        legal = game.legal_moves()
        if not (0 <= action < len(legal)) or not legal[action]:
            self._totals[seat] += self.illegal_move_reward
            self.illegal_moves += 1
            self._end()
            return self._observation(), self.illegal_move_reward, True, False, {**self._info(), "illegal_move": True}
        self._tell_move(seat, action)
        rewards, over = game.play(action)
        self._totals += rewards
        self._over = bool(over)
        self._opponents_move()
        reward = float(self._totals[seat] - before)
        if self._over:
            self._end()
        return self._observation(), reward, self._over, False, self._info()

    def action_masks(self) -> np.ndarray:
        """The learner's legal moves now (all True once the game is over)."""
        if self._over:
            return np.ones(self.action_space.n, bool)
        return np.asarray(self.game.legal_moves(), bool)

    def symmetries(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The game's symmetries (``algos.on_policy.symmetries``), or none when it lists none."""
        return list(getattr(self.game, "symmetries", list)())

    def render(self) -> str | None:
        text = self.game.render_text()
        if self.render_mode == "human":
            print(text)
            return None
        return text

    # ------------------------------------------------------------------ inside

    def _opponents_move(self) -> None:
        game = self.game
        while not self._over and game.current_player() != self.seat:
            p = game.current_player()
            player: Player = self.seated[p]  # type: ignore[assignment]
            if self._random_opponent_move:
                player, self._random_opponent_move = _RANDOM, False
            move = player.act(game, game.observe(p), np.asarray(game.legal_moves(), bool), self.np_random)
            self._tell_move(p, move)
            rewards, over = game.play(move)
            self._totals += rewards
            self._over = bool(over)

    def _end(self, record: bool = True) -> None:
        """The game is over: its outcome recorded against each opponent name (``record``), told to the players."""
        if self._recorded:
            return
        self._over = self._recorded = True
        if record:
            outcome = outcome_index(self._totals[self.seat])
            for name in dict.fromkeys(p.name for s, p in enumerate(self.seated) if s != self.seat and p is not None):
                self.outcomes.setdefault(name, [0, 0, 0])[outcome] += 1
        if self.narrate:
            self._tell_result()
        for s, p in enumerate(self.seated):
            if p is not None and hasattr(p, "game_over"):
                p.game_over(self.game, s, float(self._totals[s]))

    def _player_name(self, seat: int) -> str:
        player = self.seated[seat] if seat != self.seat else None
        return "model" if player is None else player.name

    def _tell_move(self, seat: int, move: int, why: str = "") -> None:
        if self.narrate:
            name = self._player_name(seat) + (f", {why}" if why else "")
            print(f"{seat_names(self.game)[seat]} ({name}) plays {move}", flush=True)

    def _table(self, returns: bool = False) -> str:
        """Each seat's agent name and player ("player_0 (model), player_1 (random), ..."), with its return."""
        names = seat_names(self.game)
        return ", ".join(f"{names[s]} ({self._player_name(s)})" + (f" {self._totals[s]:+.3g}" if returns else "")
                         for s in range(self.num_players))

    def _tell_result(self) -> None:
        print(f"{self.game.render_text()}\nresult: {self._table(returns=True)}", flush=True)

    def _observation(self) -> np.ndarray:
        return np.asarray(self.game.observe(self.seat), self.observation_space.dtype)

    def _info(self) -> dict:
        return {"action_mask": self.action_masks(), "seat": self.seat}

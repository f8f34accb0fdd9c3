"""Players that sit at a game (``common.games.protocol``): a random player, a policy acting from a numpy
copy of network weights, and a person at the terminal. A player offers
``act(game, obs, mask, rng) -> move`` and, optionally, ``game_over(game, seat, reward)``."""
from __future__ import annotations

import dataclasses
import sys
from typing import Any, Protocol, TextIO

import numpy as np

from common.nn.numpy_layers import (
    NUMPY_ACTIVATIONS,
    numpy_conv_stack,
    numpy_dense_stack,
)
from common.wrappers.action_mask import masked_logits


class Player(Protocol):
    """Anything that chooses a legal move of the current position."""

    name: str

    def act(self, game: Any, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int: ...


class RandomPlayer:
    """A legal move drawn uniformly."""

    name = "random"

    def act(self, game: Any, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        return int(rng.choice(np.flatnonzero(mask)))


@dataclasses.dataclass
class PolicyWeights:
    """A numpy copy of an actor-critic's policy (an mlp, or a ``board_cnn``): the convolutions ((kernel, bias,
    stride) each, applied to observations shaped ``image_shape``), the hidden dense layers (``numpy_dense_stack``
    order), the logits head, and how to apply them. Plain arrays: it pickles to env workers and never changes."""

    hidden: list[np.ndarray]
    num_layers: int
    layer_norm: bool
    activation: str
    pi_w: np.ndarray
    pi_b: np.ndarray
    image: bool = False
    convs: tuple = ()
    image_shape: tuple = ()

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """Logits [N, moves] of a batch of observations."""
        x = np.asarray(obs, np.float32)
        if self.image:
            x = x / 255.0
        if self.convs:
            x = numpy_conv_stack(x.reshape((len(x),) + tuple(self.image_shape)), self.convs)
        x = x.reshape(len(x), -1)
        h = numpy_dense_stack(x, self.hidden, self.num_layers, self.layer_norm, NUMPY_ACTIVATIONS[self.activation])
        return h @ self.pi_w + self.pi_b


def masked_choice(logits: np.ndarray, mask: np.ndarray, rng: np.random.Generator | None,
                  deterministic: bool) -> int:
    """The move of one row of ``logits`` with illegal moves removed: the best, or sampled from the softmax."""
    z = masked_logits(logits.astype(np.float64), np.asarray(mask, bool))
    if deterministic or rng is None:
        return int(np.argmax(z))
    cumulative = np.cumsum(np.exp(z - z.max()))  # inverse-CDF sampling: a third of rng.choice's cost
    return int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))


class PolicyPlayer:
    """Plays the masked moves of a policy's numpy copy, the best one (``deterministic``) or sampled; a share
    ``epsilon`` of its moves are random legal moves instead (varied positions for the learner)."""

    def __init__(self, weights: PolicyWeights, deterministic: bool = False, name: str = "policy",
                 epsilon: float = 0.0) -> None:
        self.weights, self.deterministic, self.name, self.epsilon = weights, bool(deterministic), name, float(epsilon)

    def act(self, game: Any, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        if self.epsilon and rng.random() < self.epsilon:
            return int(rng.choice(np.flatnonzero(mask)))
        return masked_choice(self.weights.logits(obs[None])[0], mask, rng, self.deterministic)


class HumanPlayer:
    """A person at the terminal: the position is drawn as text and the move typed as its number; an illegal or
    unreadable move is refused with a message and asked again. End of input stops the game (KeyboardInterrupt).

    After ``games`` finished games (0: no limit) the person is asked nothing more: a game started after the
    last one (a vec env resets a finished env at once) gets the first legal moves, silently.
    """

    name = "human"

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None, games: int = 0) -> None:
        self.stdin, self.stdout, self.games = stdin, stdout, int(games)
        self.finished = 0  # games over so far

    @property
    def done(self) -> bool:
        """Whether the person played all ``games``."""
        return 0 < self.games <= self.finished

    def _say(self, text: str) -> None:
        print(text, file=self.stdout or sys.stdout, flush=True)

    def act(self, game: Any, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
        legal = [int(a) for a in np.flatnonzero(mask)]
        if self.done:
            return legal[0]
        self._say(game.render_text())
        while True:
            self._say(f"your move ({', '.join(map(str, legal))}):")
            line = (self.stdin or sys.stdin).readline()
            if not line:
                self._say("no more input: game stopped")
                raise KeyboardInterrupt("end of input")
            text = line.strip()
            if text.lstrip("-").isdigit() and int(text) in legal:
                return int(text)
            self._say(f"illegal move {text!r}: choose one of {', '.join(map(str, legal))}")

    def game_over(self, game: Any, seat: int, reward: float) -> None:
        """Show the final position and the result from the person's side (not after the last game)."""
        if self.done:
            return
        self.finished += 1
        words = "you win" if reward > 0 else "you lose" if reward < 0 else "draw"
        self._say(f"{game.render_text()}\n{words}")

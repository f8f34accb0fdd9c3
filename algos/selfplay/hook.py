"""``SelfPlay``: what an on-policy ``learn()`` adds for ``self_play=True``. It starts the pool with the
initial policy, and after every update (``__call__(t_prev, t)``, the loop's ``after_update``) it reads the
learner's results against each snapshot from the env workers, adds a snapshot every ``snapshot_freq`` env
steps and sends the pool (numpy copies of the weights) or its new sampling chances to the workers, and runs
the self-play evaluation when the run's evaluator is due.

Under MPI the snapshots are taken at the same step counts from the same (averaged) weights, and the results
are summed over ranks before they set the chances, so the pool is the same on every rank."""
from __future__ import annotations

import types
from typing import Any

import numpy as np

from algos.selfplay.evaluation import SelfPlayEvaluation
from algos.selfplay.pool import SnapshotPool
from algos.selfplay.snapshot import check_policy, policy_weights
from common.errors import ConfigError
from common.games import connect_four
from common.logs import logger
from common.logs.log_keys import SELFPLAY_EVAL_TIME, SELFPLAY_POOL_SIZE, SELFPLAY_TRAIN
from common.mpi import mpi_util
from common.vec_env import EnvWorkerError


def game_maker(env: Any) -> Any:
    """The ``make_game`` of the env's games (``SelfPlayEnv``); ConfigError when the env is not a game."""
    try:
        return env.get_attr("make_game", indices=[0])[0]
    except (AttributeError, EnvWorkerError):
        raise ConfigError("self_play needs a game env (a common.games.SelfPlayEnv, such as TicTacToe-v0, "
                          "ThreeInARow-v0 or pettingzoo.classic:connect_four_v3)") from None


class SelfPlay:
    """The self-play state of one training: pool, results, evaluation (see the module docstring)."""

    def __init__(self, run: Any, hp: types.SimpleNamespace) -> None:
        self.run, self.env, self.model = run, run.env, run.model
        make_game = game_maker(self.env)
        check_policy(self.model)
        self.freq = int(hp.snapshot_freq)
        self.random_share, self.epsilon, self.random_first_move, self.random_opening, lookahead = (
            float(getattr(hp, name)) for name in ("random_opponents", "opponent_epsilon", "random_first_move",
                                                  "random_opening", "lookahead_opponents"))
        if lookahead and not connect_four.fits(self.env.observation_space):
            raise ConfigError(f"lookahead_opponents: the one-step lookahead player plays Connect Four boards "
                              f"(rows x columns x 2 observations), not {self.env.observation_space}")
        self.players = [(connect_four.LookaheadPlayer(), lookahead)] if lookahead else []
        self.pool = SnapshotPool(hp.pool_size, hp.opponent_sampling)
        evaluator = run.evaluator
        self.evaluation = (SelfPlayEvaluation(make_game, hp.selfplay_eval_games, evaluator.log_dir, int(run.rng.integers(2**31)))
                           if evaluator is not None else None)
        self.pool.add(self.model.num_timesteps, policy_weights(self.model))
        self._send_pool()

    def state(self) -> dict:
        """The pool, for training-state checkpoints (``--resume``)."""
        return {"pool": self.pool.state(policy_weights(self.model))}

    def load_state(self, state: dict) -> None:
        """Restore the pool of a checkpoint and send it to the env workers."""
        self.pool.load_state(state["pool"], policy_weights(self.model))
        self._send_pool()

    def _send_pool(self) -> None:
        self.env.env_method("set_opponent_pool", self.pool.payload(), self.pool.probs().tolist(),
                            fixed_share=self.random_share, epsilon=self.epsilon,
                            random_first_move=self.random_first_move, players=self.players,
                            random_opening=self.random_opening)

    def _collect_results(self) -> np.ndarray:
        """The learner's [wins, draws, losses] against each snapshot since the last call, summed over envs and ranks."""
        names = self.pool.names()
        counts = np.zeros((len(names), 3))
        for outcomes in self.env.env_method("take_outcomes"):
            for name, row in outcomes.items():
                if name in names:
                    counts[names.index(name)] += row
        return mpi_util.allreduce_sum(counts.ravel()).reshape(counts.shape) if mpi_util.size() > 1 else counts

    def __call__(self, t_prev: int, t: int) -> None:
        results = self._collect_results()
        self.pool.record(results)
        if results.sum():
            logger.logkvs(dict(zip(SELFPLAY_TRAIN, (results.sum(0) / results.sum()).tolist())))
        if t // self.freq > t_prev // self.freq:
            self.pool.add(t, policy_weights(self.model))
            self._send_pool()
        elif self.pool.sampling == "prioritised":
            self.env.env_method("set_pool_probs", self.pool.probs().tolist())
        logger.logkv(SELFPLAY_POOL_SIZE, len(self.pool.snapshots))
        evaluator = self.run.evaluator
        if self.evaluation is not None and evaluator.due(t_prev, t):
            values = self.evaluation.run(self.model, self.pool, t)
            evaluator.seconds += values[SELFPLAY_EVAL_TIME]  # kept out of time/fps like the evaluator's own time
            logger.logkvs(values)


def start(run: Any, hp: types.SimpleNamespace) -> SelfPlay | None:
    """The self-play hook of a training when ``hp.self_play`` (absent from an algorithm's table: False), else None."""
    return SelfPlay(run, hp) if getattr(hp, "self_play", False) else None

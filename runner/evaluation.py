"""Evaluation during training: the model plays in its own vec env every ``every`` env steps.

The eval env gets the training VecNormalize's statistics at each evaluation, frozen (no updates, no
reward normalisation). Returns are the env's own rewards (from the Monitor). Each evaluation logs the
``eval/`` keys, appends a row to ``evaluations.csv`` and keeps ``best.zip``, the model with the highest
mean return so far. The time spent evaluating is kept out of the training fps.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from common.logs import logger
from common.logs.curves import EVALUATIONS_FILE
from common.logs.log_keys import (
    EVAL_LENGTH_MEAN,
    EVAL_RETURN_MEAN,
    EVAL_RETURN_STD,
    EVAL_SUCCESS_RATE,
    EVAL_TIME,
    TOTAL_TIMESTEPS,
)
from common.process.std_streams import write_failed
from common.vec_env import unwrap_vec_normalize
from runner.play import play, success_text

BEST_MODEL_FILE = "best.zip"
_listeners: list[Callable[[int, EvalResult], None]] = []


@dataclasses.dataclass
class EvalResult:
    """Returns and lengths of the episodes of one evaluation."""

    returns: list[float]
    lengths: list[int]
    seconds: float
    successes: list[bool] = dataclasses.field(default_factory=list)  # info["is_success"] at episode ends, if reported

    @property
    def success_rate(self) -> float | None:
        """The share of episodes that ended with ``info["is_success"]`` true (None: the env reports none)."""
        return float(np.mean(self.successes)) if self.successes else None

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")

    @property
    def std(self) -> float:
        return float(np.std(self.returns)) if self.returns else float("nan")

    @property
    def length_mean(self) -> float:
        return float(np.mean(self.lengths)) if self.lengths else float("nan")

    def summary(self) -> str:
        """One line: episodes, mean +- std, min, max, mean length."""
        r = np.asarray(self.returns, dtype=np.float64)
        if r.size == 0:
            return "evaluation: no episode finished"
        return (f"evaluation over {r.size} episodes: return {r.mean():.6g} +- {r.std():.3g} "
                f"(min {r.min():.6g}, max {r.max():.6g}), length mean {self.length_mean:.1f}"
                f"{success_text(self.successes)}")


def copy_frozen_normalization(model: Any, env: Any) -> None:
    """Give ``env``'s VecNormalize the model's statistics (from training or from its file), frozen."""
    target = unwrap_vec_normalize(env)
    if target is None:
        return
    live = getattr(model, "vec_normalize", None)
    state = live.get_state() if live is not None else getattr(model, "vec_normalize_state", None)
    if state is not None:
        target.set_state(state)
    target.training, target.norm_reward = False, False


def evaluate(model: Any, env: Any, episodes: int, deterministic: bool = True) -> EvalResult:
    """Play ``episodes`` episodes of ``model`` in ``env`` (spread evenly over its envs), silently."""
    t0 = time.perf_counter()
    copy_frozen_normalization(model, env)
    result = play(model, env, episodes=episodes, deterministic=deterministic, out=lambda _line: None,
                  balanced=True)
    return EvalResult(result.returns, result.lengths, time.perf_counter() - t0, result.successes)


@contextlib.contextmanager
def listening(listener: Callable[[int, EvalResult], None]) -> Iterator[None]:
    """Within the block, every evaluation during training calls ``listener(timesteps, result)`` (tuning
    reports intermediate values this way; an exception it raises ends the training)."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


class Evaluator:
    """Evaluates a model every ``every`` env steps and records the results in the log folder."""

    def __init__(self, env: Any, every: int, episodes: int = 10, deterministic: bool = True,
                 log_dir: str | None = None) -> None:
        self.env, self.every, self.episodes, self.deterministic = env, int(every), int(episodes), deterministic
        self.log_dir = log_dir
        self.best_mean = -np.inf
        self.last_timesteps: int | None = None
        self.seconds = 0.0  # total time spent evaluating

    def due(self, t_prev: int, t: int) -> bool:
        """Whether a multiple of ``every`` env steps was crossed between ``t_prev`` and ``t``."""
        return self.every > 0 and t // self.every > t_prev // self.every

    def run(self, model: Any, timesteps: int) -> EvalResult:
        """Evaluate ``model`` now, log the ``eval/`` keys and record the result."""
        result = evaluate(model, self.env, self.episodes, self.deterministic)
        self.seconds += result.seconds
        self.last_timesteps = int(timesteps)
        logger.logkvs({TOTAL_TIMESTEPS: int(timesteps), EVAL_RETURN_MEAN: result.mean, EVAL_RETURN_STD: result.std,
                       EVAL_LENGTH_MEAN: result.length_mean,
                       EVAL_TIME: result.seconds,
                       **({EVAL_SUCCESS_RATE: result.success_rate} if result.successes else {})})
        logger.dumpkvs()
        for listener in _listeners:
            listener(int(timesteps), result)
        if self.log_dir:
            try:
                self._append_row(timesteps, result)
                if result.returns and result.mean > self.best_mean:
                    self.best_mean = result.mean
                    model.save(os.path.join(self.log_dir, BEST_MODEL_FILE))
            except OSError as e:  # a full disk: the evaluation is logged, training goes on
                write_failed(f"evaluation results in {self.log_dir}", e)
        return result

    def _append_row(self, timesteps: int, result: EvalResult) -> None:
        """One row of evaluations.csv; a goal env's file has a success_rate column (decided when it is created)."""
        path = os.path.join(self.log_dir or ".", EVALUATIONS_FILE)
        new = not os.path.exists(path)
        if new:
            with_success = bool(result.successes)
        else:
            with open(path, encoding="utf-8") as f:
                with_success = "success_rate" in f.readline()
        with open(path, "a", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(["timesteps", "return_mean", "return_std", "length_mean", "episodes", "seconds"]
                                + ["success_rate"] * with_success)
            success = result.success_rate if result.successes else float("nan")
            writer.writerow([int(timesteps), result.mean, result.std, result.length_mean, len(result.returns),
                             round(result.seconds, 3)] + [success] * with_success)

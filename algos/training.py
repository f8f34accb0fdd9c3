"""What every algorithm's ``learn()`` shares: setup, episode statistics, log lines, checkpoints.

A ``learn()`` reads: check its settings; ``run = setup(env, seed, build, load_path)``; then a loop
of collect -> train -> ``run.log(...)`` -> ``run.periodic(...)`` (checkpoints, evaluations); it ends with
``return run.finish()``. Every step count is in env steps
summed over all envs and MPI ranks. The log keys are the same for every algorithm (``common.logs.log_keys``);
algorithms add their own under ``train/``.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from algos import training_state
from algos.base import first_non_finite
from algos.capabilities import no_signal_advice
from common.errors import NonFiniteError
from common.files.checkpoint import (
    FOLDER as CHECKPOINT_FOLDER,
)
from common.files.checkpoint import (
    CheckpointError,
    GeneratorState,
    Values,
    checkpoint_path,
    open_checkpoint,
    read_state,
    remove_old,
    write_checkpoint,
)
from common.files.serialization import read_model_file, restore_model
from common.logs import logger
from common.logs.log_keys import (
    EP_LENGTH_MEAN,
    EP_RETURN_MEAN,
    EPISODES,
    FPS,
    TIME_ELAPSED,
    TOTAL_TIMESTEPS,
)
from common.logs.progress import get_progress
from common.mpi import mpi_util
from common.mpi.mpi_sync import mean_over_ranks
from common.process.interrupt_hold import InterruptHold
from common.process.std_streams import write_failed
from common.vec_env import unwrap_vec_normalize

KEEP_CHECKPOINTS = 5  # the newest checkpoints kept in <log dir>/checkpoints (TF's CheckpointManager keeps 5)
CHECKPOINT_NAME = re.compile(r"\d{10}\.zip")

@dataclasses.dataclass
class RunContext:
    """What the runner adds to the trainings it starts: an ``runner.evaluation.Evaluator`` (rank 0 uses it),
    the record of how the env was made (saved in model files), how many checkpoints to keep (0: all), the
    env steps between training-state checkpoints (0: none; ``common.files.checkpoint``), the checkpoint to resume
    from (this rank's, checked by the runner), and the model of the training in progress (saved on Ctrl-C).
    With ``hold_interrupts`` (one process, training-state checkpoints on) Ctrl-C, SIGTERM and SIGHUP are held
    until the loop's next step boundary, where a training-state checkpoint is written first
    (``interrupt_step`` says at which step)."""

    evaluator: Any = None
    env_record: dict | None = None
    keep_checkpoints: int = KEEP_CHECKPOINTS
    checkpoint_freq: int = 0
    resume: str | None = None
    model: Any = None
    hold_interrupts: bool = False
    hold: InterruptHold | None = None
    interrupt_step: int | None = None


_RUN_CONTEXT: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("run_context", default=None)


def current_run() -> RunContext:
    """The context of the trainings started now (a default one when no runner set any)."""
    context = _RUN_CONTEXT.get()
    if context is None:
        context = RunContext()
        _RUN_CONTEXT.set(context)
    return context


@contextlib.contextmanager
def running(context: RunContext) -> Iterator[RunContext]:
    """A block whose trainings use ``context``; the previous context is back after it."""
    token = _RUN_CONTEXT.set(context)
    try:
        yield context
    finally:
        _RUN_CONTEXT.reset(token)
        if context.hold is not None:  # learn() ended early (an error): the signals' handlers as they were
            context.hold.release(hand_over=False)


def set_run_context(**fields: Any) -> None:
    """Make ``RunContext(**fields)`` the context of the next trainings (no fields: the default one)."""
    _RUN_CONTEXT.set(RunContext(**fields))


class EnvValueError(NonFiniteError):
    """An env returned NaN or infinity (a reward or an observation); the model is still good and is saved."""


def register_model(model: Any) -> None:
    """Make ``model`` the one the runner saves when training is interrupted (None: none)."""
    current_run().model = model


def registered_model() -> Any:
    """The model of the training in progress (or last run), or None."""
    return current_run().model


class NoSignalWatch:
    """Says once (rank 0, one line) when the first ``episodes`` or more episodes of this process all returned
    the same value and all ran to the time limit (``info["TimeLimit.truncated"]``): the agent has seen no
    other outcome yet; ``advice`` names what helps (None: nothing is watched)."""

    def __init__(self, advice: str | None, episodes: int = 20) -> None:
        self.advice, self.episodes = advice, episodes
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.over = advice is None

    def see(self, ret: float, length: int, truncated: bool) -> None:
        """One finished episode; the watch ends at the first that terminated or returned another value."""
        if self.over:
            return
        if not truncated or (self.returns and ret != self.returns[0]):
            self.over, self.returns, self.lengths = True, [], []
            return
        self.returns.append(ret)
        self.lengths.append(length)

    def check(self) -> None:
        """After one vec-env step's episodes: the note, once, when enough episodes have been seen."""
        if self.over or len(self.returns) < self.episodes:
            return
        self.over = True
        low, high = min(self.lengths), max(self.lengths)
        steps = f"{high} steps" if low == high else f"{low} to {high} steps"
        if mpi_util.rank() == 0:
            logger.log(f"note: all {len(self.returns)} episodes so far returned {self.returns[0]!r} and ran to "
                       f"the time limit ({steps}): the agent has not yet seen another outcome; {self.advice}")


class EpisodeStats:
    """Returns and lengths of the last ``window`` finished episodes (from the Monitor's ``info["episode"]``);
    with ``advice``, the no-signal note of ``NoSignalWatch``."""

    def __init__(self, window: int = 100, groups: tuple[str, ...] = (), advice: str | None = None) -> None:
        self.returns: deque = deque(maxlen=window)
        self.lengths: deque = deque(maxlen=window)
        self.count = 0
        self.watch = NoSignalWatch(advice)
        # the returns of each agent group and of whole teams, for envs of several agents (``AgentVecEnv``)
        self.groups: dict[str, deque] = {g: deque(maxlen=window) for g in (*groups, "team")} if groups else {}

    def add(self, infos: list[dict], dones: np.ndarray | None = None) -> int:
        """Record the episodes that finished in one vec-env step; returns how many did."""
        new = 0
        for i in (range(len(infos)) if dones is None else np.flatnonzero(dones)):
            ep = infos[i].get("episode")
            if ep is not None and not np.isfinite(ep["r"]):
                raise EnvValueError(f"env {i} returned a non-finite reward (episode return {ep['r']} after "
                                    f"{self.count} episodes); stopped")
            if ep is not None:
                self.returns.append(float(ep["r"]))
                self.lengths.append(int(ep["l"]))
                self.watch.see(float(ep["r"]), int(ep["l"]), bool(infos[i].get("TimeLimit.truncated", False)))
                new += 1
                for group, key in ((ep.get("group"), "r"), ("team", "team")):
                    if key in ep and group in self.groups:
                        self.groups[group].append(float(ep[key]))
        self.count += new
        self.watch.check()
        return new

    def restore(self, returns: list[float], lengths: list[int], count: int,
                groups: dict[str, list[float]] | None = None) -> None:
        """Replace the windows and the count (a resumed run)."""
        self.returns.clear()
        self.returns.extend(float(r) for r in returns)
        self.lengths.clear()
        self.lengths.extend(int(n) for n in lengths)
        self.count = int(count)
        for name, window in self.groups.items():
            window.clear()
            window.extend(float(r) for r in (groups or {}).get(name, ()))

    def group_means(self) -> dict[str, tuple[float, int]]:
        """``rollout/ep_rew_mean/<group>`` -> (mean return, episodes) of each agent group and of teams."""
        return {f"{EP_RETURN_MEAN}/{g}": (float(np.mean(w)) if w else float("nan"), len(w))
                for g, w in self.groups.items()}

    def mean_return(self) -> float:
        """Mean return of the window (nan before the first episode)."""
        return float(np.mean(self.returns)) if self.returns else float("nan")

    def mean_length(self) -> float:
        """Mean length of the window (nan before the first episode)."""
        return float(np.mean(self.lengths)) if self.lengths else float("nan")


class TrainingRun:
    """The state ``setup`` returns: the model, this rank's generator, episode statistics, the clock."""

    def __init__(self, model: Any, env: Any, rank_seed: int | None, save_interval: int,
                 evaluator: Any = None) -> None:
        self.model, self.env, self.evaluator = model, env, evaluator
        self.nranks = mpi_util.size()
        self.rng = np.random.default_rng(rank_seed)
        self.episodes = EpisodeStats(groups=tuple(getattr(env, "agent_groups", ())),
                                     advice=no_signal_advice(getattr(model, "algorithm", None)))
        self.save_interval = int(save_interval or 0)
        self.keep_checkpoints = int(current_run().keep_checkpoints)
        self.checkpoint_failures = 0
        self.tstart = time.perf_counter()
        self.checkpoint_freq = int(current_run().checkpoint_freq or 0)
        self.resume_path: str | None = current_run().resume
        self.last_state_step: int | None = None
        self.env_states = training_state.EnvStates(env)
        self.components: dict[str, Any] = {}
        self.hold = self._hold_interrupts()

    def _hold_interrupts(self) -> InterruptHold | None:
        """Hold Ctrl-C/SIGTERM/SIGHUP until the next ``periodic`` when the runner asks for it and a
        training-state checkpoint can be written there (one process, a log folder, ``checkpoint_freq``)."""
        context = current_run()
        if not (context.hold_interrupts and self.checkpoint_freq and self.nranks == 1 and logger.get_dir()):
            return None
        if context.hold is not None:
            context.hold.release(hand_over=False)
        hold = InterruptHold()
        context.hold = hold if hold.start() else None
        return context.hold

    def track(self, **components: Any) -> None:
        """Add a loop's parts to its training-state checkpoints: objects with ``state()``/``load_state()``
        (``common.files.checkpoint``; numpy Generators are wrapped)."""
        for name, c in components.items():
            self.components[name] = GeneratorState(c) if isinstance(c, np.random.Generator) else c

    def resume(self) -> bool | None:
        """Restore the model and every tracked part from the checkpoint the runner chose; call it once the
        loop has tracked them. None: not resuming; True: the envs were restored too (episodes continue);
        False: they could not be (the loop's fresh ``env.reset()`` stands, episodes restart)."""
        if self.resume_path is None:
            return None
        parts = self._state_parts(elapsed=0.0)
        opened = open_checkpoint(self.resume_path)
        meta = opened.metadata
        if meta.get("algorithm") != self.model.algorithm:
            raise CheckpointError(f"{opened.path!r} is a checkpoint of {meta.get('algorithm')!r}, "
                                  f"not {self.model.algorithm}")
        arrays, states = read_state(opened, self.model.get_arrays(), parts)
        try:
            self.model.set_arrays(arrays)
            for name, part in parts.items():
                part.load_state(states[name])
            self.model.num_timesteps = self.last_state_step = int(meta["step"])
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise CheckpointError(f"{opened.path!r}: training state does not fit this run ({e})") from None
        self.tstart = time.perf_counter() - float(parts["clock"].elapsed)
        return self.env_states.restored

    def _state_parts(self, elapsed: float) -> dict[str, Any]:
        """What a training-state checkpoint holds besides the model: the run's own parts, the training clock
        (``elapsed`` seconds) and the loop's tracked parts."""
        return {**training_state.run_components(self), "clock": Values(elapsed=elapsed), **self.components}

    def progress(self, timesteps: int) -> None:
        """Move the progress bar (the mean return is computed only when it redraws)."""
        get_progress().update(timesteps, self.episodes.mean_return)

    def log(self, timesteps: int, train_stats: dict[str, Any] | None = None, **extra: Any) -> None:
        """One log line: the shared keys, ``train_stats`` as ``train/<name>`` (averaged over ranks),
        and ``extra`` as given (rank 0's values). A collective under MPI: every rank calls it."""
        elapsed = time.perf_counter() - self.tstart - (self.evaluator.seconds if self.evaluator else 0.0)
        eps = self.episodes
        n = len(eps.returns)
        values = {EP_RETURN_MEAN: (eps.mean_return(), n), EP_LENGTH_MEAN: (eps.mean_length(), n), **eps.group_means()}
        values.update({"train/" + k: (v, 1) for k, v in (train_stats or {}).items() if v is not None})
        self.check_finite(timesteps)
        logger.logkv(TOTAL_TIMESTEPS, int(timesteps))
        logger.logkv(FPS, int(timesteps / elapsed) if elapsed > 0 else 0)
        logger.logkv(TIME_ELAPSED, elapsed)
        logger.logkv(EPISODES, int(mpi_util.allreduce_sum(np.array([eps.count]))[0]))
        logger.logkvs(mean_over_ranks(values))
        logger.logkvs(extra)
        logger.dumpkvs()  # writes on rank 0 only

    def check_finite(self, timesteps: int) -> None:
        """NonFiniteError when a weight of the model became NaN or infinite (checked at every log line)."""
        name = first_non_finite(self.model.get_arrays())
        if name is not None:
            raise NonFiniteError(f"training diverged by {int(timesteps)} env steps: {name} holds NaN or "
                                 "infinity; stopped, nothing saved")

    def check_rewards(self, rewards: np.ndarray, timesteps: int) -> None:
        """NonFiniteError when ``rewards`` (the env's, possibly bootstrapped with values) hold NaN or infinity;
        a diverged model is named first, since its values can be the cause."""
        if np.isfinite(rewards).all():
            return
        self.check_finite(timesteps)
        env = int(np.flatnonzero((~np.isfinite(np.asarray(rewards).reshape(-1, self.env.num_envs))).any(0))[0])
        raise EnvValueError(f"env {env} returned a non-finite reward by {int(timesteps)} env steps; stopped")

    def check_observations(self, obs: Any, timesteps: int, rollout: bool = False) -> None:
        """EnvValueError when the float parts of ``obs`` hold NaN or infinity, naming the env and the step: ``obs``
        is one step's batch [envs, ...] seen after ``timesteps`` env steps, or with ``rollout`` a rollout's
        [steps, envs, ...] whose first row was seen after ``timesteps``."""
        n = self.env.num_envs
        for part in obs.values() if isinstance(obs, dict) else [obs]:
            part = np.asarray(part)
            if part.dtype.kind != "f" or np.isfinite(part).all():
                continue
            rows = part.reshape(part.shape[0] if rollout else 1, n, -1)
            row, env = np.argwhere(~np.isfinite(rows).all(-1))[0]
            raise EnvValueError(f"env {env} returned a NaN or infinite observation at step "
                                f"{int(timesteps) + int(row) * n * self.nranks}; stopped")

    def periodic(self, t_prev: int, t: int) -> None:
        """What is due when the step count went from ``t_prev`` to ``t``: a checkpoint
        ``<log dir>/checkpoints/<t>.zip`` every ``save_interval`` env steps (rank 0, with a log folder; the
        newest ``keep_checkpoints`` are kept), and an evaluation every ``--eval_freq`` env steps (when the
        runner set an evaluator)."""
        every = self.save_interval
        if every and t // every > t_prev // every and mpi_util.is_root() and logger.get_dir():
            self.checkpoint(os.path.join(logger.get_dir(), "checkpoints"), t)
        if self.evaluator is not None and self.evaluator.due(t_prev, t):
            self.evaluator.run(self.model, t)
        freq = self.checkpoint_freq
        if freq and t // freq > t_prev // freq:
            self.save_state(t)
        if self.hold is not None and self.hold.held is not None:  # Ctrl-C or a signal came during this step
            self._leave_after_checkpoint(t)

    def _leave_after_checkpoint(self, t: int) -> None:
        """Write the training-state checkpoint of step ``t`` (unless written), then let the held signal raise."""
        if self.last_state_step != t:
            self.save_state(t)
        if self.last_state_step == t:
            current_run().interrupt_step = t
        self.hold.release()

    def save_state(self, t: int) -> None:
        """Write this rank's training-state checkpoint ``<log dir>/resume/<t>-rank<r>.zip`` (with a log
        folder; the newest 2 are kept) and log its size and write time. A write that fails (a full disk)
        does not stop training: the first failure is one line on stderr. A model holding NaN or infinity
        is not checkpointed (the next log line stops the run)."""
        folder = logger.get_dir()
        arrays = self.model.get_arrays()
        if not folder or first_non_finite(arrays) is not None:
            return
        rank = mpi_util.rank()
        path = checkpoint_path(os.path.join(folder, CHECKPOINT_FOLDER), t, rank)
        parts = self._state_parts(elapsed=time.perf_counter() - self.tstart)
        meta = {**self.model.metadata(), "step": int(t), "rank": rank, "nranks": self.nranks,
                "log_files": training_state.log_file_sizes(folder, rank)}
        try:
            seconds = write_checkpoint(path, meta, arrays, {k: v.state() for k, v in parts.items()})
            remove_old(os.path.dirname(path), rank, written=int(t))
        except OSError as e:
            self.checkpoint_failures += 1
            if self.checkpoint_failures == 1:
                write_failed(f"checkpoint {path}", e)
            return
        first = self.last_state_step is None
        self.last_state_step = int(t)
        logger.log(f"checkpoint {path}: {os.path.getsize(path) / 2**20:.1f} MiB in {seconds:.2f} s",
                   level=logger.INFO if first else logger.DEBUG)  # one line per run is enough to see the cost

    def checkpoint(self, folder: str, t: int) -> None:
        """Save ``<folder>/<t>.zip`` and remove the older checkpoints beyond ``keep_checkpoints``. A write that
        fails (a full disk) does not stop training: the first failure is one line on stderr."""
        path = os.path.join(folder, f"{t:010d}.zip")
        try:
            self.model.save(path)
            names = sorted(n for n in os.listdir(folder) if CHECKPOINT_NAME.fullmatch(n))
            for name in names[:-self.keep_checkpoints] if self.keep_checkpoints > 0 else []:
                os.unlink(os.path.join(folder, name))
        except OSError as e:
            self.checkpoint_failures += 1
            if self.checkpoint_failures == 1:
                write_failed(f"checkpoint {path}", e)

    def finish(self) -> Any:
        """End of training: the final model is evaluated (when evaluating and not just done) and returned."""
        self.model.episodes = self.episodes
        ev = self.evaluator
        if ev is not None and ev.last_timesteps != self.model.num_timesteps:
            ev.run(self.model, self.model.num_timesteps)
        if self.checkpoint_freq and self.last_state_step != self.model.num_timesteps:
            self.save_state(self.model.num_timesteps)  # always one at the end
        logger.flush()  # the last table, when stdout's were rate-limited
        if self.hold is not None and self.hold.held is not None:
            self._leave_after_checkpoint(self.model.num_timesteps)
        elif self.hold is not None:
            self.hold.release()
        return self.model


def setup(env: Any, seed: int | None, build: Callable[[], Any], load_path: str | None,
          save_interval: int = 0) -> TrainingRun:
    """Prepare one training run, in this order: TF threads and global seeds, ``build()`` the model, attach
    the env's VecNormalize, restore ``load_path``, make the parameters equal on every MPI rank, register
    the model for Ctrl-C, and seed this rank's envs and generator with ``seed + 10000 * rank``."""
    from common.nn.tf_util import configure_threads, seed_everything

    configure_threads()
    seed_everything(seed)
    model = build()
    model.vec_normalize = unwrap_vec_normalize(env)
    model.env_record = current_run().env_record
    if load_path is not None:
        restore_model(model, read_model_file(load_path, model.algorithm, env), env, training=True)
    if mpi_util.size() > 1:
        arrays = model.get_arrays()
        model.set_arrays(dict(zip(arrays, mpi_util.broadcast_arrays(list(arrays.values())))))
    register_model(model)
    rank_seed = mpi_util.setup_process_seed(seed)
    if seed is not None:
        env.seed(rank_seed)
    return TrainingRun(model, env, rank_seed, save_interval, current_run().evaluator if mpi_util.is_root() else None)

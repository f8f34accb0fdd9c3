"""The command line's flow: parse the flags, resolve the configuration, build the envs, train or load,
save, play, evaluate, draw the learning curve; errors as one line (``run.py`` is the entry)."""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any, NoReturn

from algos import training
from algos.base import ALIASES
from common import tracking
from common.env_vars import LOGDIR, env_text
from common.errors import UserError
from common.logs import logger, progress
from common.mpi import mpi_util
from common.mpi.mpi_launch import launched_by_mpi, launcher_size
from common.process import startup
from common.process.signals import describe, exit_status, termination_as_interrupt
from common.process.std_streams import open_closed_streams, silence_stdout, write_failed
from common.trust import flag_text, names_module, require_on_command_line
from common.vec_env import EnvWorkerError, env_traceback
from common.vec_env.main_reimport import leave_if_reimporting_main
from run_util import (
    UsageError,
    check_regular_file,
    check_writable_dir,
    check_writable_file,
    claimed_log_dir,
    file_name,
    get_alg_module,
    numbered_log_dir,
    registered_env_id,
    writing_into,
)
from runner.cli import common_arg_parser
from runner.config import RunConfig, resolve
from runner.curve_worker import FAILED, CurveWorker, draw_here
from runner.envs import (
    build_env,
    check_video_rendering,
    env_errors,
    eval_env,
    play_env,
    video_env_kind,
)
from runner.evaluation import copy_frozen_normalization
from runner.play import PlayResult, play
from runner.resume import prepare, resumed_arguments, split_command_line
from runner.saving import SaveError, save_and_tell, save_model, saved_words

LOGS_FOLDER = "logs"  # the default log folders' root, under the current folder (rl-zoo's layout)


def parse_args(argv: Sequence[str]) -> tuple[Any, dict[str, Any]]:
    """Runner flags and the extra ``--k=v`` hyperparameters, checked for obvious mistakes; with
    ``--resume=LOGDIR`` those of the run in LOGDIR (``runner.resume``)."""
    args, extra = split_command_line(argv)
    if args.resume is not None:
        args, extra = resumed_arguments(args, extra, argv)
    if args.num_timesteps == 0 and args.load_path is None and args.play:
        raise UsageError("--play with --num_timesteps=0 needs --load_path=MODEL_FILE (or train first)")
    if args.load_path is not None:
        check_regular_file(args.load_path, "--load_path")
        if not os.path.isfile(args.load_path):
            raise UsageError(f"--load_path {args.load_path}: no such file")
    _fill_from_file(args)
    return args, extra


def complete_args(args: Any) -> SimpleNamespace:
    """A copy of ``args`` (any object) with every runner flag it lacks set to the command line's default."""
    defaults = vars(common_arg_parser().parse_args([]))
    given = {k: getattr(args, k) for k in dir(args) if not k.startswith("_")}
    out = SimpleNamespace(**{**defaults, **given})
    _fill_from_file(out)
    return out


def _fill_from_file(args: Any) -> None:
    """``--alg`` and ``--env`` (with its ``--env_kwargs`` and ``--wrapper``) not given: the ``--load_path``
    file's (else ppo2 and no env). The file's env_kwargs are then the env's, whole: no entry adds to them."""
    meta: dict[str, Any] = {}
    if args.load_path and (args.alg is None or args.env is None):
        from common.files.model_file import ModelFile

        meta = ModelFile(args.load_path).metadata
    if args.alg is None:
        found = meta.get("algorithm")
        args.alg = found if isinstance(found, str) and found.isidentifier() else "ppo2"
    record = meta.get("env")
    if args.env is None and isinstance(record, dict) and isinstance(record.get("env"), str):
        _env_from_file(args, record)


def _env_from_file(args: Any, record: dict[str, Any]) -> None:
    """The env of a model file's env record, taken only as far as a file may choose (``common.trust``): a
    registered env id (``module:EnvId`` whose id is registered without the module: that id), and wrappers
    only when the command line names the same ones."""
    env, kwargs, wrappers = record["env"], record.get("env_kwargs") or {}, record.get("wrappers") or []
    kwargs = kwargs if isinstance(kwargs, dict) and all(isinstance(k, str) for k in kwargs) else None
    wrappers = wrappers if isinstance(wrappers, list) and all(isinstance(w, str) for w in wrappers) else []
    source = f"{args.load_path} was trained with"
    if names_module(env) and registered_env_id(env.split(":", 1)[1]):
        env = env.split(":", 1)[1]  # registered without the module (gymnasium's, this project's): nothing to import
    if names_module(env):  # the command line's --env is then the user's choice, with its own env options
        extra = [flag_text(flag, value) for flag, value in (("env_kwargs", kwargs), ("wrapper", wrappers)) if value]
        require_on_command_line("env", env, None, source, extra)
    if wrappers:
        require_on_command_line("wrapper", wrappers, args.wrapper, source)
    args.env = env
    if kwargs is not None and args.env_kwargs is None:
        args.env_kwargs, args.env_kwargs_from_file = kwargs, True


def _write_config(folder: str, config: RunConfig) -> str:
    """Write the resolved configuration to ``<folder>/config.json``; returns the path."""
    record = {**config.record(), "argv": config.args.argv,
              "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    path = os.path.join(folder, "config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, sort_keys=True, default=repr)
    return path


def train(args: Any, extra_args: dict[str, Any]) -> tuple[Any, Any]:
    """Build the env, call the algorithm's ``learn`` and return ``(model, env)``.

    ``args`` may be any object carrying some of the runner's flags (baselines' tutorials pass a small
    class with ``env``, ``alg``, ``num_timesteps``, ``network``...): the others take their command-line
    defaults. Ctrl-C during learn: the model the algorithm registered (``algos.training.register_model``,
    held by the run's ``RunContext``) is saved to ``--save_path`` when given, then KeyboardInterrupt propagates.
    """
    return train_config(resolve(complete_args(args), extra_args))


def train_config(config: RunConfig) -> tuple[Any, Any]:
    """``train`` for a resolved configuration."""
    args = config.args
    if logger.get_dir() is not None and mpi_util.rank() == 0 and not args.resume:
        with writing_into(logger.get_dir(), "--log_path"):
            _write_config(logger.get_dir(), config)
        logger.log(config.describe())
    with env_errors(f"making env {args.env}"):
        env = build_env(config, **_training_video_env(config))
    if args.save_video_interval and mpi_util.rank() == 0:  # under MPI rank 0 records, the others just train
        interval = args.save_video_interval
        from common.vec_env.vec_video_recorder import VecVideoRecorder

        env = VecVideoRecorder(env, os.path.join(logger.get_dir() or ".", "videos"),
                               record_video_trigger=lambda step: step % interval == 0,
                               video_length=args.save_video_length)
    for note in config.notes:
        logger.log(note)
    envs = (f"{env.num_envs} env(s)" if mpi_util.size() == 1
            else f"{mpi_util.size()} ranks x {env.num_envs} env{'s' if env.num_envs > 1 else ''}")
    logger.log(f"Training {args.alg} on {config.env_type}:{config.env_id} for {args.num_timesteps} timesteps "
               f"with {envs}")
    bar = progress.ProgressBar(args.num_timesteps, enabled=False if args.no_progress or mpi_util.rank() else None)
    progress.set_progress(bar)
    evaluator = _evaluator(config) if args.eval_freq and mpi_util.rank() == 0 else None
    keep = training.KEEP_CHECKPOINTS if args.keep_checkpoints is None else args.keep_checkpoints
    context = training.RunContext(evaluator, env_record=config.env_record(), keep_checkpoints=keep,
                                  checkpoint_freq=args.checkpoint_freq,
                                  resume=args.resume_checkpoint, hold_interrupts=True)
    try:
        with training.running(context):
            model = config.learn(env=env, network=config.network, total_timesteps=args.num_timesteps,
                                 seed=args.seed, **config.learn_kwargs)
    except KeyboardInterrupt as e:
        bar.close()
        if context.interrupt_step is not None and logger.get_dir():
            print(f"run: training state of step {context.interrupt_step} saved; continue with: python -m run "
                  f"--resume={_shown_path(logger.get_dir())}", file=sys.stderr)
        _save_after_interrupt(context.model, args.save_path, describe(e))
        e.reported = True  # type: ignore[attr-defined]
        env.close()
        raise
    except (EnvWorkerError, training.EnvValueError, mpi_util.RankFailedError) as e:  # keep what was trained
        bar.close()
        env.close()
        raise _failure_after_saving(e, context.model, args.save_path) from e
    except BaseException:
        env.close()  # no worker process outlives a failed training
        raise
    finally:
        bar.close()
        progress.set_progress(None)
        logger.flush()  # the last table, when stdout's were rate-limited
        if evaluator is not None:
            evaluator.env.close()
    if evaluator is not None and evaluator.log_dir:
        final = os.path.join(evaluator.log_dir, "final.zip")
        try:
            model.save(final)
        except OSError as e:  # --save_path's own save comes next, with its fallbacks
            write_failed(final, e, "the model is saved to --save_path next")
    return model, env


def _training_video_env(config: RunConfig) -> dict[str, Any]:
    """``build_env`` arguments for ``--save_video_interval``: frames as arrays, rendered where they can be."""
    if not config.args.save_video_interval:
        return {}
    return {"env_kwargs": {"render_mode": "rgb_array"}, "vec_env_kind": video_env_kind(config, config.args.vec_env)}


def _evaluator(config: RunConfig) -> Any:
    """The evaluator of ``--eval_freq``: its own env, results into the log folder."""
    from runner.evaluation import Evaluator

    args = config.args
    return Evaluator(eval_env(config), args.eval_freq, args.eval_episodes or 10, not args.eval_stochastic,
                     logger.get_dir())


def _save_after_interrupt(model: Any, save_path: str | None, what: str = "interrupted") -> None:
    """Save the model of an interrupted training; one line on stderr from rank 0 says where."""
    if mpi_util.rank() != 0:
        return
    if save_path and model is not None:
        print(f"run: {what}; {save_and_tell(model, save_path, logger.get_dir())}", file=sys.stderr)
    elif save_path:
        print(f"run: {what} before the algorithm had a model; nothing saved", file=sys.stderr)
    else:
        print(f"run: {what} (no --save_path given, model not saved)", file=sys.stderr)


def _failure_after_saving(error: UserError, model: Any, save_path: str | None) -> UserError:
    """``error`` (the env failed, returned NaN, or another rank failed) again after saving ``model``: its first
    line naming this rank under MPI (another rank's error names its own) and saying where the model went."""
    line = str(error).splitlines()[0]
    if mpi_util.size() > 1 and not isinstance(error, mpi_util.RankFailedError):
        line = f"rank {mpi_util.rank()}: {line}"
    line += _save_after_env_failure(model, save_path)
    if isinstance(error, EnvWorkerError):
        return EnvWorkerError(line, error.env_index, env_traceback(error))
    if isinstance(error, mpi_util.RankFailedError):
        return mpi_util.RankFailedError(line, error.details)
    return type(error)(line)


def _save_after_env_failure(model: Any, save_path: str | None) -> str:
    """Save the model of a training whose env failed (rank 0); the words to add to the env's error line."""
    if not save_path or mpi_util.rank() != 0:
        return ""
    if model is None:
        return "; nothing saved (the algorithm had no model yet)"
    return "; " + save_and_tell(model, save_path, logger.get_dir())


def play_model(model: Any, config: RunConfig, train_env: Any = None) -> PlayResult:
    """Play ``model`` in a fresh play env of the run ``config`` (what ``--play`` does)."""
    args = config.args
    env, note = _play_env(config)
    try:
        if note:
            print(note)
        if train_env is not None:
            copy_frozen_normalization(model, env)
        return play(model, env, episodes=args.play_episodes, deterministic=not args.stochastic)
    finally:
        env.close()


def _load_model(args: Any, env: Any) -> Any:
    """The model of ``--load_path``: its algorithm comes from the file (``--alg``, when given, must agree)."""
    from algos.base import load_model

    if ":" in (args.alg or ""):  # an algorithm outside this project loads its own files
        return get_alg_module(args.alg).load(args.load_path, env)
    return load_model(args.load_path, env, network=args.network, algorithm=args.alg)


def _run(argv: Sequence[str], command_line: bool = False) -> Any:
    with contextlib.ExitStack() as held:  # the log folder's lock, released when the run ends
        return _run_holding(argv, held, command_line)


def _run_holding(argv: Sequence[str], held: contextlib.ExitStack, command_line: bool) -> Any:
    args, extra = parse_args(argv)
    if args.verbose:
        startup.show_tensorflow_logs()
    if not args.resume:
        args.argv = list(argv)
    curve_worker = _start_curve_worker(args) if command_line else None  # matplotlib on another core meanwhile
    if curve_worker is not None:
        held.callback(curve_worker.close)
    config = resolve(complete_args(args), extra)  # every cheap check before anything slow
    _check_outputs(config)
    trains = config.args.num_timesteps > 0 or bool(config.args.resume)
    _open_log_folder(config, held, trains)
    if config.args.num_timesteps == 0 and config.args.load_path:
        return _load_play_evaluate(config)
    return _train_save_play(config, curve_worker)


def _check_outputs(config: RunConfig) -> None:
    """Check the run's outputs and optional services before anything slow (one line each)."""
    args = config.args
    if args.save_path == "":
        raise UsageError("--save_path is empty; give a file name such as model.zip")
    if args.save_path:
        args.save_path = check_writable_file(args.save_path, "--save_path")
    if args.play_video:
        args.play_video = check_writable_dir(args.play_video, "--play_video")
    check_video_rendering(config)
    if args.track:
        tracking.check_available()
    if mpi_util.size() > 1:
        mpi_util.collective_timeout()  # a bad RUNNER_MPI_TIMEOUT is refused before anything slow


def _open_log_folder(config: RunConfig, held: contextlib.ExitStack, trains: bool) -> None:
    """Choose the run's seed (drawn when none is given) and its log folder (claimed for a training), set up
    the logger, the default save path and tracking; say where the run logs."""
    args, rank = config.args, mpi_util.rank()
    drawn = trains and args.seed is None and not args.resume
    if drawn:
        args.seed = _drawn_seed()
    numbered = not args.log_path and not env_text(LOGDIR) and (trains or args.track)
    log_dir = check_writable_dir(args.log_path, "--log_path") if args.log_path else None
    log_dir = _shared_log_dir(lambda: log_dir or _default_log_dir(config, numbered))
    with writing_into(log_dir, "--log_path"):
        if rank == 0 and (args.log_path or numbered):
            held.enter_context(claimed_log_dir(log_dir, training=args.num_timesteps > 0 and not args.resume))
        if args.resume:
            args.resume_checkpoint = prepare(log_dir, args)
        if log_dir is None:  # playing or evaluating a file: no log folder
            logger.reset()
        else:
            logger.configure(log_dir, format_strs=args.log_format, append=bool(args.resume))
    if trains and not args.save_path and log_dir is not None:
        args.save_path = os.path.join(logger.get_dir(), "model.zip")
    if rank == 0 and log_dir is not None and args.log_format is not None and "stdout" not in args.log_format:
        print(f"Logging to {logger.get_dir()}")
    if drawn and rank == 0:
        _tell(args, f"Seed {args.seed} (drawn; --seed={args.seed} repeats this run)")
    if args.track and rank == 0:
        _start_tracking(config, held)


def _load_play_evaluate(config: RunConfig) -> Any:
    """``--num_timesteps=0 --load_path=F``: load the file, play and/or evaluate it, save it if asked."""
    args, rank, folder = config.args, mpi_util.rank(), logger.get_dir()
    if rank == 0 and folder and not os.path.exists(os.path.join(folder, "config.json")):  # keep a run's own
        with writing_into(folder, "--log_path"):
            _write_config(folder, config)
    model = _load_and_play(config) if args.play and rank == 0 else _load(config)
    if args.eval_episodes and rank == 0:
        _evaluate_file_model(model, config)
    _save(model, args.save_path, rank)
    return model


def _train_save_play(config: RunConfig, curve_worker: CurveWorker | None) -> Any:
    """Train, save, draw the learning curve, play when asked, and end with the next commands."""
    args, rank = config.args, mpi_util.rank()
    model, env = train_config(config)
    saved = None
    try:
        saved = _save(model, args.save_path, rank)
        if rank == 0 and logger.get_dir() is not None:
            _write_learning_curve(logger.get_dir(), curve_worker)
        if args.play and rank == 0:
            play_model(model, config, train_env=env)
    except KeyboardInterrupt as e:
        _tell_interrupt_after_training(e, model, args.save_path, saved)
        raise
    finally:
        env.close()
    if saved is not None:
        print(next_steps(config, saved), flush=True)
    return model


def next_steps(config: RunConfig, saved: str) -> str:
    """The closing lines of a training run: where its logs are, and the commands that play, evaluate and
    plot it with the real paths (the last line is a command)."""
    args, folder = config.args, logger.get_dir()
    load = [f"--load_path={_shown_path(saved)}"]
    if ":" in args.alg:  # an algorithm outside this project: the file cannot name it
        load.insert(0, flag_text("alg", args.alg))
    if names_module(args.env) or config.wrappers:  # what a file may not choose (common.trust)
        load += [flag_text("env", args.env), *([flag_text("env_kwargs", config.env_kwargs)] if config.env_kwargs else []),
                 *([flag_text("wrapper", config.wrappers)] if config.wrappers else [])]
    model = " ".join(load)
    lines = [f"Next steps (logs in {_shown_path(folder)}):" if folder else "Next steps:",
             f"  play:     python -m run {model} --num_timesteps=0 --play",
             f"  evaluate: python -m run {model} --num_timesteps=0 --eval_episodes=10"]
    if folder:
        lines.append(f"  plot:     python -m plot {_shown_path(folder)}")
    return "\n".join(lines)


def _shown_path(path: str) -> str:
    """``path`` as a shell word: relative to the current folder when under it, else absolute."""
    path = os.path.abspath(path)
    relative = os.path.relpath(path)
    return shlex.quote(path if relative.startswith(os.pardir) else relative)


def _tell_interrupt_after_training(interrupt: KeyboardInterrupt, model: Any, save_path: str | None,
                                   saved: str | None) -> None:
    """Ctrl-C or a signal once training is over: the model is saved now unless it already was, and one line
    from rank 0 says where it is."""
    what = f"{describe(interrupt)} after training"
    if saved is None:
        _save_after_interrupt(model, save_path, what)
    elif mpi_util.rank() == 0:
        print(f"run: {what}; model saved to {saved}", file=sys.stderr)
    interrupt.reported = True  # type: ignore[attr-defined]


def _start_tracking(config: RunConfig, held: contextlib.ExitStack) -> None:
    """``--track``: a W&B run fed by the logger, finished with the run's media when the run ends."""
    args = config.args
    tracker = tracking.Tracker(config.record(), logger.get_dir(), args.wandb_project, entity=args.wandb_entity,
                               group=args.wandb_group, tags=tracking.parse_tags(args.wandb_tags),
                               name=os.path.basename(logger.get_dir()), resume=bool(args.resume))
    logger.get_current().output_formats.append(tracker.output)
    held.callback(tracker.finish, [args.play_video])


def _load_and_play(config: RunConfig) -> Any:
    """Load ``--load_path`` into a play env and play it (under MPI only rank 0 plays)."""
    env, note = _play_env(config)
    try:
        model = _load_model(config.args, env)
        if note:
            print(note)
        play(model, env, episodes=config.args.play_episodes, deterministic=not config.args.stochastic)
    finally:
        env.close()
    return model


def _play_env(config: RunConfig) -> tuple[Any, str | None]:
    """``play_env`` with ``--opponent`` seated at its games; games of more than two players narrated."""
    env, note = play_env(config)
    from algos.selfplay.opponents import narrate_games, seat_opponent

    try:
        narrate_games(env)
        if config.args.opponent:
            seat_opponent(env, config.args.opponent, games=config.args.play_episodes)
    except BaseException:
        env.close()
        raise
    return env, note


def _evaluate_file_model(model: Any, config: RunConfig) -> None:
    """``--load_path=F --num_timesteps=0 --eval_episodes=K``: evaluate and print one summary line."""
    from runner.evaluation import evaluate

    env = eval_env(config)
    try:
        result = evaluate(model, env, config.args.eval_episodes, not config.args.eval_stochastic)
    finally:
        env.close()
    print(result.summary())


def _load(config: RunConfig) -> Any:
    """Load ``--load_path`` against the run's env."""
    with env_errors(f"making env {config.args.env}"):
        env = build_env(config)
    try:
        return _load_model(config.args, env)
    finally:
        env.close()


def _shared_log_dir(choose: Callable[[], str | None]) -> str | None:
    """The log folder ``choose()`` gives; under MPI rank 0's, for every rank (its monitor files go there)."""
    if mpi_util.size() == 1:
        return choose()
    return mpi_util.broadcast_object(choose() if mpi_util.is_root() else None)


def _default_log_dir(config: RunConfig, numbered: bool) -> str | None:
    """The log folder of a run given no ``--log_path``: ``$RUNNER_LOGDIR``; else with ``numbered`` a new folder
    ``./logs/<alg>/<env>_<N>`` (``run_util.numbered_log_dir``); else None (playing or evaluating a file)."""
    args = config.args
    if env_text(LOGDIR):
        return os.path.abspath(os.path.expanduser(env_text(LOGDIR)))
    if not numbered:
        return None
    alg = ALIASES.get(args.alg, args.alg)
    with writing_into(os.path.abspath(LOGS_FOLDER), "--log_path"):
        return numbered_log_dir(os.path.join(LOGS_FOLDER, file_name(alg)), file_name(config.env_id))


def _drawn_seed() -> int:
    """A fresh seed for a run given none (rank 0's, for every rank under MPI)."""
    seed = secrets.randbelow(2**31)
    return mpi_util.broadcast_object(seed if mpi_util.is_root() else None) if mpi_util.size() > 1 else seed


def _tell(args: Any, line: str) -> None:
    """``line`` to the logger's text outputs, and on stdout when ``--log_format`` leaves stdout out."""
    logger.log(line)
    if args.log_format is not None and "stdout" not in args.log_format:
        print(line, flush=True)


def _start_curve_worker(args: Any) -> CurveWorker | None:
    """The learning curve's helper process, for a command that trains in one process (not under mpiexec). Not
    for ``main([...])`` from Python: a Python session imports matplotlib once for all its runs."""
    trains = bool(args.resume) or (args.num_timesteps or 0) > 0
    if not trains or (launched_by_mpi(os.environ) and launcher_size(os.environ) != 1):
        return None
    return CurveWorker()


def _write_learning_curve(log_dir: str, worker: CurveWorker | None = None) -> None:
    """Draw ``learning_curve.png`` into the log folder (skipped, with a note, when it cannot be drawn): by
    ``worker`` when it can, else in this process."""
    answer = worker.draw(log_dir) if worker is not None else FAILED
    if answer is FAILED:
        answer = draw_here(log_dir)
    if answer.get("warning"):
        logger.warn(f"learning curve not written: {answer['warning']}")
    elif answer.get("path"):
        logger.log(f"Learning curve: {answer['path']}")


def _save(model: Any, save_path: str | None, rank: int) -> str | None:
    """The final save (rank 0): the path written, None when nothing was to be saved here; SaveError, after
    saving to a fallback file, when ``save_path`` failed."""
    if not save_path or rank != 0:
        return None
    written, reason = save_model(model, save_path, logger.get_dir())
    if reason is not None:
        raise SaveError(saved_words(save_path, written, reason))
    logger.log(f"Saved model to {save_path}")
    return written


def main(args: Sequence[str] | None = None) -> Any:
    """Run the command line ``args`` and return the model.

    Args:
        args: the arguments (without the program name). None means the real command line: errors
            then print one line ``run: error: ...`` and exit 2, Ctrl-C exits 130. With a list (from
            Python) errors are raised, so an IDE shows them. SIGTERM and SIGHUP act as Ctrl-C does
            (the model is saved to ``--save_path``) and exit 143 and 129.
    """
    leave_if_reimporting_main()  # an env worker re-running a script that calls main without the main guard
    if args is not None:
        return _run(args)
    open_closed_streams()
    with mpi_util.abort_on_failure(), termination_as_interrupt():  # under mpiexec one failing rank ends all
        try:
            return _run(sys.argv[1:], command_line=True)
        except UserError as e:
            _end_with_error(e)
        except KeyboardInterrupt as e:
            if not getattr(e, "reported", False) and mpi_util.rank() == 0:
                print(f"run: {describe(e)} before training; nothing saved", file=sys.stderr)
            mpi_util.exit_after_interrupt(exit_status(e))
        except BrokenPipeError as e:  # stdout's reader left while the model was played or evaluated
            silence_stdout()
            print(f"run: stopped: stdout was closed ({e.strerror})", file=sys.stderr)
            sys.exit(141)


def _end_with_error(error: UserError) -> NoReturn:
    """Print ``error`` as one line ``run: error: ...`` and exit 2. Under MPI a rank other than 0 first hands it
    to rank 0, which saves the model, prints it and ends the job; this rank speaks only when rank 0 does not
    answer (a ``RankFailedError`` here says rank 0 stopped answering: this rank speaks at once)."""
    text = (str(error).strip().splitlines() or [type(error).__name__])[0]
    details = _env_details(error)
    if not isinstance(error, mpi_util.RankFailedError) and mpi_util.tell_root(text, details):
        text += f" (rank 0 did not answer within {mpi_util.collective_timeout():g} s: nothing saved)"
    where = _write_env_traceback(details)
    print(f"run: error: {text}" + (f" (the env's traceback: {where})" if where else ""), file=sys.stderr)
    sys.exit(2)


def _env_details(error: UserError) -> str:
    """The traceback of the env behind ``error`` (this rank's or another's), or ''."""
    if isinstance(error, EnvWorkerError):
        return env_traceback(error)
    return error.details if isinstance(error, mpi_util.RankFailedError) else ""


def _write_env_traceback(text: str) -> str | None:
    """Write an env failure's traceback to ``<log dir>/env_error.txt``; its path, or None when not written."""
    folder = logger.get_dir()
    if not text or not folder:
        return None
    path = os.path.join(folder, "env_error.txt")
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        return None
    return path


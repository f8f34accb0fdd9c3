"""``python -m run --resume=LOGDIR``: the run's command line from LOGDIR/config.json (flags given again must
agree; flags that choose code or output paths must be given again, ``common.trust``), the checkpoint to
continue from (the newest usable one of this rank; a corrupt newest one falls back to the previous), and
the log files cut back to that checkpoint."""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from algos.base import ALIASES
from algos.hyperparameters import PARAMETER_ALIASES
from algos.training_state import steps_reached, truncate_log_files
from common.files.checkpoint import (
    FOLDER,
    CheckpointError,
    checkpoint_path,
    newest_usable,
    open_checkpoint,
)
from common.files.model_file import TEMP_PREFIX
from common.mpi import mpi_util
from common.trust import (
    COMMAND_LINE_FLAGS,
    command_line_only,
    require_all_on_command_line,
)
from run_util import UsageError, read_small_file
from runner.cli import common_arg_parser, parse_cmdline_kwargs

FREE_FLAGS = ("resume", "log_path", "no_progress", "verbose", "checkpoint_freq")  # may be given anew when resuming


def split_command_line(argv: Sequence[str]) -> tuple[Any, dict[str, Any]]:
    """The runner's flags and the extra ``--k=v`` settings (aliases mapped to their names)."""
    args, unknown = common_arg_parser().parse_known_args(list(argv))
    extra = parse_cmdline_kwargs(unknown)
    return args, {PARAMETER_ALIASES.get(k, k): v for k, v in extra.items()}


def resumed_arguments(args: Any, extra: dict[str, Any], argv: Sequence[str]) -> tuple[Any, dict[str, Any]]:
    """The flags and settings of the run in ``args.resume`` (its config.json's command line), after
    checking that every flag and setting of ``argv`` agrees with them (UsageError naming the first that
    does not)."""
    folder = os.path.abspath(args.resume)
    path = os.path.join(folder, "config.json")
    if not os.path.lexists(path):
        raise UsageError(f"--resume {folder}: no readable config.json there; give the log folder of a run")
    try:
        record = json.loads(read_small_file(path, "--resume"))
    except (ValueError, RecursionError):  # UnicodeDecodeError included
        raise UsageError(f"--resume {folder}: config.json is not valid JSON") from None
    original = record.get("argv") if isinstance(record, dict) else None
    if not isinstance(original, list) or not all(isinstance(a, str) for a in original):
        raise UsageError(f"--resume {folder}: config.json holds no command line to resume")
    run_args, run_extra = split_command_line(original)
    given = {tok[2:].split("=", 1)[0].replace("-", "_") for tok in argv if tok.startswith("--")}
    check_code_given(run_args, {name: getattr(args, name) for name in given & set(vars(args))}, folder)
    for name in sorted(given & set(vars(run_args)) - set(FREE_FLAGS)):
        now, then = getattr(args, name), getattr(run_args, name)
        if now != then and not (name == "alg" and ALIASES.get(now, now) == ALIASES.get(then, then)):
            raise UsageError(f"--resume: --{name}={now} disagrees with the run in {folder} (--{name}={then})")
    if args.log_path and os.path.abspath(args.log_path) != folder:
        raise UsageError(f"--resume: --log_path={args.log_path} is not the resumed folder {folder}")
    settings = record.get("hyperparameters") if isinstance(record.get("hyperparameters"), dict) else {}
    for key, value in extra.items():
        then = run_extra.get(key, settings.get(key))
        if value != then:
            raise UsageError(f"--resume: --{key}={value} disagrees with the run in {folder} (--{key}={then})")
    run_args.resume, run_args.log_path, run_args.load_path = folder, folder, None
    run_args.no_progress = run_args.no_progress or args.no_progress
    run_args.verbose = run_args.verbose or args.verbose
    if "checkpoint_freq" in given:
        run_args.checkpoint_freq = args.checkpoint_freq
    run_args.argv = original
    return run_args, run_extra


def check_code_given(run_args: Any, given: dict[str, Any], folder: str) -> None:
    """TrustError unless every flag of the resumed run that chooses code or an output path
    (``common.trust``) is in ``given`` (the resuming command line's flags) with the same value; one error
    names every flag missing."""
    chosen = {flag: getattr(run_args, flag) for flag in COMMAND_LINE_FLAGS}
    chosen = {flag: value for flag, value in chosen.items() if command_line_only(flag, value)}
    require_all_on_command_line(chosen, given, f"--resume: the run in {folder} used")


def prepare(folder: str, args: Any) -> str:
    """Choose this rank's checkpoint in ``<folder>/resume``, check it belongs to this run (algorithm, env,
    rank count), cut the log files back to it and say (rank 0) from which step the run resumes; returns
    the checkpoint's path."""
    rank, nranks = mpi_util.rank(), mpi_util.size()
    states = os.path.join(folder, FOLDER)
    if rank == 0:
        remove_unfinished_writes(states)
    opened, notes = newest_usable(states, rank)
    step = int(opened.metadata.get("step", -1))
    if nranks > 1:
        common = min(mpi_util.allgather_object(step))
        if common != step:
            opened, step = open_checkpoint(checkpoint_path(states, common, rank)), common
    meta = opened.metadata
    if meta.get("nranks") != nranks:
        raise CheckpointError(f"{opened.path!r} was written by {meta.get('nranks')} MPI rank(s); resume it with "
                              f"the same number (mpiexec -n {meta.get('nranks')}), not {nranks}")
    alg = ALIASES.get(args.alg, args.alg)
    if meta.get("algorithm") != alg:
        raise CheckpointError(f"{opened.path!r} is a checkpoint of {meta.get('algorithm')!r}, this run is {alg}")
    env = meta.get("env", {}).get("env") if isinstance(meta.get("env"), dict) else None
    if env != args.env:
        raise CheckpointError(f"{opened.path!r} is a checkpoint of env {env!r}, this run is {args.env}")
    reached = steps_reached(folder) if rank == 0 else None
    truncate_log_files(folder, meta.get("log_files"))
    if rank == 0:
        for note in notes:
            print(f"run: {note}; resuming from the previous checkpoint", file=sys.stderr)
        lost = "steps lost unknown" if reached is None else f"{max(reached - step, 0)} steps lost"
        print(f"resumed from step {step} ({lost})", flush=True)
    return opened.path


def remove_unfinished_writes(folder: str) -> None:
    """Remove the temporary files of checkpoint writes that were cut short (nobody writes there while the
    resumed run holds the log folder and has not started training)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(TEMP_PREFIX) and name.endswith(".zip"):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass

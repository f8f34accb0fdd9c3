"""Hyperparameter search with Optuna: ``python -m tune --alg=ppo2 --env=CartPole-v1 --trials=20``.

Each trial samples the algorithm's search space (``hyperparams/search/<alg>.toml``), trains ``--seeds``
runs of ``--budget`` env steps through the runner (shipped entries below the sampled values), and
scores the mean over seeds of the final model's deterministic evaluation. Intermediate evaluations feed
a median pruner; among trials with the same score the best is the one whose evaluations were higher on the
way (the mean of all its evaluations: it learnt sooner and held on), which matters where many trials reach
an env's maximum. ``--storage`` (a journal file, or a database URL such as ``sqlite:///tune.db``) lets
several processes or hosts run trials of one study at once. At the end (or on Ctrl-C, with the study
saved) the folder ``--out`` gets ``best.toml`` (an entry for ``--hyperparams``), ``trials.md`` (a
summary table) and ``history.png`` (the optimization history).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import reprlib
import sys
import tomllib
from collections.abc import Sequence
from typing import Any

from common.errors import UserError

ROOT = os.path.dirname(os.path.abspath(__file__))
SEARCH_DIR = os.path.join(ROOT, "hyperparams", "search")
EVALUATIONS_PER_RUN = 5
CURVE_MEAN = "curve_mean"  # trial attribute: the mean of all the trial's evaluations (the tie-break)


OUTPUT_FILES = ("best.toml", "trials.md", "history.png")
JOURNAL_START = b'{"op_code":'  # how every line of an Optuna journal file starts


class TuneError(UserError):
    """A user mistake for tune (one line, exit 2)."""


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise TuneError("tuning needs Optuna: pip install -r requirements-tune.txt") from None
    return optuna


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="tune", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--alg", default="ppo2", help="algorithm with a search space in hyperparams/search/")
    p.add_argument("--env", required=True, help="env id (module:EnvId for your own)")
    p.add_argument("--trials", type=int, default=20, help="trials this process runs")
    p.add_argument("--seeds", type=int, default=3,
                   help="training runs per trial (seeds first_seed .. first_seed+N-1)")
    p.add_argument("--first_seed", type=int, default=100,
                   help="the first trial seed (default 100: results reported on seeds 0, 1, ... were not tuned on)")
    p.add_argument("--budget", type=float, default=50_000, help="env steps per training run")
    p.add_argument("--storage", default=None, help="journal file or database URL shared by all workers")
    p.add_argument("--study", default=None, help="study name (default: <alg>-<env>)")
    p.add_argument("--out", default=None, help="output folder (default: tune-<alg>-<env>)")
    p.add_argument("--sampler_seed", type=int, default=None, help="seed of the TPE sampler")
    p.add_argument("--num_env", type=int, default=None, help="passed to the runner")
    p.add_argument("--eval_episodes", type=int, default=10,
                   help="episodes per evaluation of a training run (the last one scores the run)")
    p.add_argument("--verbose", action="store_true", help="show TensorFlow's start-up log lines (also RUNNER_VERBOSE=1)")
    args = p.parse_args(list(argv))
    if args.trials < 1 or args.seeds < 1 or args.budget < 1:
        raise TuneError("--trials, --seeds and --budget must be positive")
    if args.first_seed < 0:
        raise TuneError("--first_seed must be 0 or more")
    safe_env = args.env.replace(":", "_").replace("/", "_")
    args.study = args.study or f"{args.alg}-{safe_env}"
    args.out = os.path.abspath(args.out or f"tune-{args.alg}-{safe_env}")
    args.budget = int(args.budget)
    return args


def algorithms_with_search_spaces() -> list[str]:
    """The algorithms that have a search space in hyperparams/search/, sorted."""
    return sorted(f[:-5] for f in os.listdir(SEARCH_DIR) if f.endswith(".toml"))


def search_space(alg: str) -> dict[str, dict[str, Any]]:
    """The search space of ``alg``: name -> {low, high[, log]} or {choices}."""
    path = os.path.join(SEARCH_DIR, f"{alg}.toml")
    if not os.path.exists(path):
        known = algorithms_with_search_spaces()
        raise TuneError(f"no search space for '{alg}' (hyperparams/search/{alg}.toml); have: {', '.join(known)}")
    with open(path, "rb") as f:
        space = tomllib.load(f)
    for name, spec in space.items():
        if not isinstance(spec, dict) or not ("choices" in spec or {"low", "high"} <= set(spec)):
            raise TuneError(f"hyperparams/search/{alg}.toml [{name}]: needs choices, or low and high")
    return space


def _int_range(spec: dict[str, Any]) -> bool:
    return isinstance(spec["low"], int) and isinstance(spec["high"], int)


def sample(trial: Any, space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One value per hyperparameter of ``space`` from ``trial``."""
    out = {}
    for name, spec in space.items():
        if "choices" in spec:
            out[name] = trial.suggest_categorical(name, spec["choices"])
        elif _int_range(spec):
            out[name] = trial.suggest_int(name, spec["low"], spec["high"], log=bool(spec.get("log", False)))
        else:
            out[name] = trial.suggest_float(name, float(spec["low"]), float(spec["high"]),
                                            log=bool(spec.get("log", False)))
    return out


def outside_space(trial: Any, space: dict[str, dict[str, Any]]) -> str | None:
    """Why ``trial``'s parameters are not what ``sample`` draws from ``space`` (the first name not in it, drawn
    from another distribution, or whose value has another type, lies outside its range or is none of its
    choices); None when they all are."""
    for name, value in trial.params.items():
        spec = space.get(name)
        if spec is None:
            return f"{reprlib.repr(name)} is not in the search space"
        if not _same_distribution(trial.distributions.get(name), spec):
            return f"{name} was drawn from another distribution than the search space's"
        if not _in_spec(value, spec):
            return f"{name} = {reprlib.repr(value)} is outside the search space"
    return None


def _same_distribution(distribution: Any, spec: dict[str, Any]) -> bool:
    """Whether Optuna takes ``distribution`` for the one ``sample`` uses for ``spec`` (else sampling fails)."""
    kinds = _optuna().distributions
    if "choices" in spec:
        return isinstance(distribution, kinds.CategoricalDistribution) and list(distribution.choices) == spec["choices"]
    return isinstance(distribution, kinds.IntDistribution if _int_range(spec) else kinds.FloatDistribution)


def _in_spec(value: Any, spec: dict[str, Any]) -> bool:
    if "choices" in spec:
        return any(type(value) is type(c) and value == c for c in spec["choices"])
    types = (int,) if _int_range(spec) else (int, float)
    return type(value) in types and spec["low"] <= value <= spec["high"]


def foreign_trials(study: Any, space: dict[str, dict[str, Any]]) -> list[tuple[int, str]]:
    """(number, reason) of each trial of ``study`` whose parameters are not values of ``space``: trials
    written into a shared storage by something else than this search."""
    return [(t.number, why) for t in study.trials if (why := outside_space(t, space)) is not None]


def describe_foreign(alg: str, foreign: list[tuple[int, str]]) -> str:
    """``foreign`` (from ``foreign_trials``) in a few words: how many, and the first one's reason."""
    number, why = foreign[0]
    return (f"{len(foreign)} trial(s) with parameters outside hyperparams/search/{alg}.toml "
            f"(trial {number}: {why})")


def train_trial(args: argparse.Namespace, trial: Any, params: dict[str, Any]) -> float:
    """Mean over seeds of the final evaluation; reports every evaluation to the pruner and keeps the mean of
    all of them as the trial's ``curve_mean`` attribute."""
    optuna = _optuna()
    import run
    from runner.evaluation import listening

    finals, curve = [], []
    try:  # the curve mean is written once per trial (pruned ones too), not at every evaluation
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            last: list[float] = []

            def report(timesteps: int, result: Any, seed: int = seed, last: list[float] = last) -> None:
                last[:] = [result.mean]
                curve.append(result.mean)
                trial.report(result.mean, (seed - args.first_seed) * args.budget + timesteps)
                if trial.should_prune():
                    raise optuna.TrialPruned()

            argv = [f"--alg={args.alg}", f"--env={args.env}", f"--num_timesteps={args.budget}", f"--seed={seed}",
                    f"--eval_freq={max(args.budget // EVALUATIONS_PER_RUN, 1)}", f"--eval_episodes={args.eval_episodes}",
                    f"--log_path={os.path.join(args.out, f'trial{trial.number}', f'seed{seed}')}",
                    "--log_format=csv", "--no_progress", "--checkpoint_freq=0",  # trials are not resumed
                    *([f"--num_env={args.num_env}"] if args.num_env else []),
                    *[f"--{k}={v!r}" for k, v in params.items()]]
            with listening(report):
                run.main(argv)
            if not last or not math.isfinite(last[0]):
                return float("-inf")
            finals.append(last[0])
        return sum(finals) / len(finals)
    finally:
        if curve:
            trial.set_user_attr(CURVE_MEAN, sum(curve) / len(curve))


def open_study(args: argparse.Namespace) -> Any:
    """The study in ``--storage`` (created when new): TPE sampler, median pruner, maximizing."""
    optuna = _optuna()
    storage = args.storage
    if storage and "://" not in storage:  # a journal file: processes on one file system share it safely
        storage = open_journal(storage)
    elif storage:
        storage = open_database(storage)
    return optuna.create_study(
        study_name=args.study, storage=storage, load_if_exists=True, direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=args.sampler_seed, n_startup_trials=5),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=args.budget // 2))


def open_journal(path: str) -> Any:
    """The Optuna journal storage of the file ``path`` (created when absent); TuneError when its folder is
    missing, or the file is not a regular file or not an Optuna journal (nothing is appended to it then)."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from run_util import check_regular_file

    path = os.path.abspath(path)
    if not os.path.isdir(os.path.dirname(path)):
        raise TuneError(f"--storage {path}: no folder {os.path.dirname(path)}; create it first")
    check_regular_file(path, "--storage")
    try:
        if os.path.exists(path):
            with open(path, "rb") as f:
                start = f.read(len(JOURNAL_START))
            if start and start != JOURNAL_START:
                raise TuneError(f"--storage {path} is not an Optuna journal file (it starts with {start!r})")
        return JournalStorage(JournalFileBackend(path))  # reads the whole journal
    except (OSError, ValueError) as e:  # ValueError: a line that is not JSON (UnicodeDecodeError included)
        raise TuneError(f"--storage {path}: not a readable Optuna journal ({type(e).__name__}: "
                        f"{_first_line(e)})") from None


def open_database(url: str) -> Any:
    """Optuna's storage in the database ``url``; TuneError when it cannot be opened (no such database
    driver or no driver installed, no such folder, a file that is not a database)."""
    from optuna.storages import RDBStorage
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return RDBStorage(url)
    except (SQLAlchemyError, ImportError) as e:  # ImportError: the database's driver is not installed
        raise TuneError(f"--storage {shown_url(url)}: cannot open it as an Optuna database ({_first_line(e)})") from None


def shown_url(url: str) -> str:
    """``url`` with its password, if any, as ``***`` (for messages)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:  # not a database URL: nothing to hide
        return url


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def write_results(args: argparse.Namespace, study: Any, space: dict[str, dict[str, Any]]) -> str | None:
    """best.toml, trials.md and history.png in ``--out`` from the trials whose parameters are values of
    ``space`` (a warning line counts the others); the path of best.toml (None: no finished trial)."""
    optuna = _optuna()
    os.makedirs(args.out, exist_ok=True)
    foreign = foreign_trials(study, space)
    if foreign:
        print(f"tune: warning: skipped {describe_foreign(args.alg, foreign)}", file=sys.stderr)
    skipped = {number for number, _ in foreign}
    trials = [t for t in study.trials if t.number not in skipped]
    done = sorted((t for t in trials if t.state == optuna.trial.TrialState.COMPLETE), key=ranking, reverse=True)
    names = sorted({k for t in trials for k in t.params})
    title = (f"# {args.study}: {len(done)} complete of {len(trials)} trials (best first: final evaluation, "
             "then the mean of all evaluations)")
    lines = [title, "",
             "| trial | value | curve mean | " + " | ".join(names) + " |", "| --- " * (len(names) + 3) + "|"]
    for t in done:
        cells = [f"{v:.4g}" if isinstance(v, float) else str(v) for v in (t.params.get(k, "") for k in names)]
        lines.append(f"| {t.number} | {t.value:.2f} | {ranking(t)[1]:.2f} | " + " | ".join(cells) + " |")
    with open(os.path.join(args.out, "trials.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    if not done:
        return None
    _plot_history(trials, study.study_name, os.path.join(args.out, "history.png"))
    best = done[0]
    path = os.path.join(args.out, "best.toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"# python -m tune --alg={args.alg} --env={args.env}: trial {best.number} of {len(study.trials)}, "
                f"value {best.value:.2f} (final evaluation, mean of seeds "
                f"{args.first_seed}-{args.first_seed + args.seeds - 1} at {args.budget} steps)\n")
        f.write(f'[env."{args.env.split(":")[-1]}"]\n')
        f.writelines(f"{k} = {json.dumps(v)}\n" for k, v in best.params.items())  # JSON scalars are TOML scalars
    return path


def ranking(trial: Any) -> tuple[float, float]:
    """Sort key of a finished trial: its value (final evaluation), then the mean of all its evaluations."""
    return trial.value, trial.user_attrs.get(CURVE_MEAN, -math.inf)


def _plot_history(trials: list[Any], title: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    done = [t for t in trials if t.value is not None]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([t.number for t in done], [t.value for t in done], "o", label="trial value")
    best, running = [], -math.inf
    for t in done:
        running = max(running, t.value)
        best.append(running)
    ax.plot([t.number for t in done], best, "-", label="best so far")
    ax.set(xlabel="trial number", ylabel="final evaluation (mean return over seeds)", title=title)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # trials are counted: whole-number ticks
    ax.legend()
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)


def check_outputs(folder: str) -> None:
    """UsageError unless ``folder`` and its output files can be written (no output is a device, a FIFO or a link)."""
    from run_util import check_writable_dir, check_writable_file

    check_writable_dir(folder, "--out")
    for name in OUTPUT_FILES:
        check_writable_file(os.path.join(folder, name), "--out")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study; 0 when done, 130 after Ctrl-C (with results written), 2 for a user error."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        from common.process import startup

        startup.quiet_tensorflow(["--verbose"] if args.verbose else [])  # before run imports TensorFlow
        optuna = _optuna()
        space = search_space(args.alg)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        check_outputs(args.out)
        study = open_study(args)
        foreign = foreign_trials(study, space)
        if foreign:
            raise TuneError(f"study {args.study} in {shown_url(args.storage)} holds {describe_foreign(args.alg, foreign)}: "
                            "written by something else than this search; use a new --study or --storage")
    except UserError as e:
        print(f"tune: error: {_first_line(e)}", file=sys.stderr)
        return 2
    status = 0
    try:
        # a sampled combination the algorithm refuses (one-line UserError) fails that trial, not the study
        study.optimize(lambda trial: train_trial(args, trial, sample(trial, space)), n_trials=args.trials,
                       catch=(UserError,))
    except KeyboardInterrupt:
        print("tune: interrupted; the study is saved in its storage", file=sys.stderr)
        status = 130
    best = write_results(args, study, space)
    print(f"tune: {len(study.trials)} trials in study {args.study}; results in {args.out}"
          + (f"; best entry: {best} (use --hyperparams={best})" if best else ""))
    return status


if __name__ == "__main__":
    sys.exit(main())

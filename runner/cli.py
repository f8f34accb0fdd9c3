"""The command-line parser of run.py (``common_arg_parser``) and the parsing of the hyperparameters it
passes on to ``learn`` (``parse_cmdline_kwargs``)."""

from __future__ import annotations

import argparse
import ast
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from common.errors import ConfigError, UserError

VEC_ENV_KINDS = ("auto", "dummy", "subproc", "envpool")  # here, not in env_factory, so --help imports no numpy


class ArgumentError(ConfigError):
    """A malformed command line (raised instead of argparse's print-and-exit)."""


# Other libraries' names of the runner's flags (rl-baselines3-zoo, CleanRL): accepted, with a note.
FLAG_ALIASES: dict[str, tuple[str, str]] = {
    "n_timesteps": ("num_timesteps", "rl-baselines3-zoo"), "total_timesteps": ("num_timesteps", "CleanRL"),
    "n_envs": ("num_env", "rl-baselines3-zoo"), "num_envs": ("num_env", "CleanRL"),
    "algo": ("alg", "rl-baselines3-zoo"), "env_id": ("env", "CleanRL"), "trained_agent": ("load_path", "rl-baselines3-zoo"),
    "n_eval_envs": ("eval_envs", "rl-baselines3-zoo"), "wandb_project_name": ("wandb_project", "CleanRL"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ArgumentError(message)

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        """argparse's, after ``runner_flag_names``: dashes and other libraries' names of the flags mapped."""
        tokens, notes = runner_flag_names(sys.argv[1:] if args is None else args, self.flag_names())
        parsed, unknown = super().parse_known_args(tokens, namespace)
        parsed.flag_notes = notes
        return parsed, unknown

    def flag_names(self) -> set[str]:
        """The runner's flags, without their dashes."""
        return {option[2:] for action in self._actions for option in action.option_strings if option.startswith("--")}


def runner_flag_names(args: Sequence[str], flags: set[str]) -> tuple[list[str], list[str]]:
    """``args`` with the runner's flags written with dashes (``--num-timesteps``) or by another library's name
    (``--n_envs``, ``FLAG_ALIASES``) in their own spelling, and a note for each name mapped; other tokens
    as they are."""
    out, notes = [], []
    for token in args:
        name, eq, value = token[2:].partition("=") if token.startswith("--") else ("", "", "")
        plain = name.replace("-", "_")
        if plain in FLAG_ALIASES and plain not in flags:
            canonical, library = FLAG_ALIASES[plain]
            notes.append(f"note: --{name} -> --{canonical} ({library}'s name)")
            token = f"--{canonical}{eq}{value}"
        elif plain != name and plain in flags:
            token = f"--{plain}{eq}{value}"
        out.append(token)
    return out, notes


def _literal_dict(text: str) -> dict[str, Any]:
    """A dict literal (``--env_kwargs``)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise argparse.ArgumentTypeError(f"expected a dict literal such as \"{{'key': 1}}\", got {text!r}")
    return value


def _finite_float(text: str) -> float:
    """argparse type: a finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def count(minimum: int = 0) -> Callable[[str], int]:
    """argparse type of every count flag: a whole number >= ``minimum``, written 500000, 5e5 or 500_000."""

    def parse(text: str) -> int:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number such as 5e5, got {text!r}") from None
        if not value.is_integer():
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {text}")
        return int(value)

    return parse


def _log_formats(text: str) -> list[str]:
    from common.logs.logger import KNOWN_FORMATS

    formats = [f.strip() for f in text.split(",") if f.strip()]
    bad = [f for f in formats if f not in KNOWN_FORMATS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown format {bad[0]!r}; choose from {','.join(KNOWN_FORMATS)}")
    return formats


def common_arg_parser() -> argparse.ArgumentParser:
    """The runner's flags. Flags it does not know are hyperparameters for ``learn`` (``--lr=3e-4``)."""
    p = _Parser(
        prog="run",
        allow_abbrev=False,
        description="Train (and/or play) a reinforcement-learning algorithm on a gymnasium env. "
        "Any other --name=value is passed to the algorithm's learn() (values are Python literals).",
        epilog="example: python -m run --alg=ppo2 --env=CartPole-v1 --num_timesteps=1e5 --lr=3e-4",
    )
    a = p.add_argument
    a("--env", help="environment id, or module:EnvId to import a module that registers it", type=str)
    a("--env_kwargs", help="keyword arguments for gym.make, a Python dict literal: \"{'continuous': True}\"; "
      "its keys win over a hyperparameter entry's env_kwargs",
      type=_literal_dict, default=None)
    a("--wrapper", help="your gymnasium.Wrapper around each env: module:Class or \"module:Class(key=value)\"; "
      "repeat for several (the first is innermost); for a PettingZoo parallel env a function of the env, such as "
      "\"supersuit:resize_v1(x_size=84, y_size=84)\"", action="append", default=None)
    a("--env_type", help="override the env type used to pick defaults and wrappers (atari, mujoco, ...)")
    a("--seed", help="random seed (env i of MPI rank r gets seed + 10000*r + i)", type=int, default=None)
    a("--alg", help="algorithm: a folder of algos/ (ppo2, deepq, ...) or package.module:learn; default: the "
      "--load_path file's algorithm, else ppo2", default=None)
    a("--num_timesteps", help="environment steps to train for (1e6 is accepted; 0: no training)",
      type=count(0), default=int(1e6))
    a("--network", help="network name (mlp, cnn, lstm, ...); default: the algorithm's choice", default=None)
    a("--hyperparams", help="TOML file of hyperparameters: top-level keys, [env_type.<type>] and [env.\"<id>\"] "
      "entries, over the shipped hyperparams/<alg>.toml and under the command line", default=None)
    a("--gamestate", help="game state to load (retro games only)", default=None)
    a("--num_env", help="number of envs stepped in parallel on each rank (default: CPU count for atari, else the "
      "algorithm's: 8 for a2c, 1 for the others)",
      type=count(1), default=None)
    a("--reward_scale", help="multiply rewards by this factor before the algorithm sees them",
      type=_finite_float, default=1.0)
    a("--save_path", help="file to save the trained model to (a .zip archive; default: model.zip in the log folder)",
      default=None)
    a("--load_path", help="model file to load: play it with --num_timesteps=0, else continue training it",
      default=None)
    a("--save_video_interval", help="record a video every this many steps (0: never)", type=count(0),
      default=0)
    a("--save_video_length", help="frames of each video of --save_video_interval", type=count(1),
      default=200)
    a("--log_path", help="folder for logs, monitor files and config.json (default: a new logs/<alg>/<env>_<N>)",
      default=None)
    a("--keep_checkpoints", help="checkpoints (hyperparameter save_interval) kept in <log_path>/checkpoints: the "
      "newest N, 0 for all (default 5)", type=count(0), default=None)
    a("--checkpoint_freq", help="env steps (all envs and ranks) between training-state checkpoints in "
      "<log_path>/resume, for --resume; one is always written at the end; 0: none (default 50000)",
      type=count(0), default=50_000)
    a("--resume", help="continue the run whose log folder is LOGDIR from its newest checkpoint, with the "
      "configuration in LOGDIR/config.json (flags given again must agree)", metavar="LOGDIR", default=None)
    a("--log_format", help="comma-separated outputs: stdout,log,csv,json,tensorboard", type=_log_formats,
      default=None)
    a("--vec_env", help="auto: in-process for cheap envs, subprocesses otherwise; or dummy / subproc / envpool "
      "(Atari, MuJoCo and classic control in envpool's C++ threads: pip install -r requirements-envpool.txt)",
      choices=VEC_ENV_KINDS, default="auto")
    a("--in_series", help="with subproc: envs stepped in series inside each worker process (default: as few "
      "as keep one worker process per CPU core)", type=count(1), default=None)
    a("--no_progress", help="do not draw the progress bar (it is off anyway when stderr is not a terminal)",
      action="store_true")
    a("--eval_freq", help="evaluate the model every this many env steps (all envs and ranks; 0: never) in a "
      "separate env; results in evaluations.csv, eval/* log keys and best.zip", type=count(0), default=0)
    a("--eval_episodes", help="episodes per evaluation (default 10); with --load_path and --num_timesteps=0: "
      "evaluate the file's model and print the result", type=count(1), default=None)
    a("--eval_envs", help="envs of the evaluation env", type=count(1), default=1)
    a("--eval_stochastic", help="evaluate with sampled actions instead of the deterministic ones",
      action="store_true")
    a("--play", help="after training (or loading), run the model in the env and print episode returns",
      action="store_true")
    a("--play_episodes", help="episodes to play (0: until Ctrl-C)", type=count(0), default=5)
    a("--opponent", help="two-player games: who the model plays against with --play: random (default), human "
      "(moves typed at the terminal), lookahead (Connect Four: wins, blocks, else random) or a model FILE",
      default=None)
    a("--stochastic", help="play with sampled actions instead of the deterministic ones", action="store_true")
    a("--play_video", help="folder to write the played episodes to, one <env>-episode-<k>.mp4 each (works "
      "without a display: MuJoCo through EGL, see README)",
      default=None)
    a("--no_render", help="do not open a window while playing", action="store_true")
    a("--track", help="track the run with Weights & Biases (pip install -r requirements-track.txt): every logged "
      "key, the configuration, the learning curve and videos; WANDB_MODE=offline keeps it in <log_path>/wandb",
      action="store_true")
    a("--wandb_project", help="W&B project of --track (default: runner)", default="runner")
    a("--wandb_entity", help="W&B entity (team or user) of --track (default: yours)", default=None)
    a("--wandb_group", help="W&B group of --track, e.g. one per experiment over seeds", default=None)
    a("--wandb_tags", help="W&B tags of --track, comma separated: --wandb_tags=baseline,v2", default=None)
    a("--verbose", help="show TensorFlow's start-up and C++ log lines (hidden by default; also RUNNER_VERBOSE=1)",
      action="store_true")
    # what the runner sets while it works, declared here so that every namespace has the same attributes
    p.set_defaults(argv=None, resume_checkpoint=None, env_kwargs_from_file=False, flag_notes=[])
    return p


def print_help(argv: Sequence[str]) -> None:
    """``--help``: the runner's flags; with ``--alg`` also that algorithm's settings (for ``--env``'s entries)."""
    parser = common_arg_parser()
    parser.print_help()
    try:
        args, unknown = parser.parse_known_args([token for token in argv if token not in ("-h", "--help")])
        if args.alg:  # runner.config imports numpy and gymnasium: not for --help alone
            from runner.config import settings_help

            print("\n" + settings_help(args, parse_cmdline_kwargs(unknown)))
    except UserError as e:
        print(f"run: error: {e}", file=sys.stderr)
        sys.exit(2)


def _literal(text: str) -> Any:
    """A Python literal (numbers, True/False/None, lists, dicts, quoted strings); else the text itself."""
    lowered = text.strip().lower()
    if lowered in ("true", "false", "none"):
        return {"true": True, "false": False, "none": None}[lowered]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def parse_cmdline_kwargs(args: Sequence[str]) -> dict[str, Any]:
    """Turn ``--k=v`` / ``--k v`` / ``--flag`` tokens into a dict; values via ``ast.literal_eval``.

    Dashes in names become underscores. A bare ``--flag`` means True.

    Raises:
        ArgumentError: a token that is not a ``--name`` or its value.
    """
    out: dict[str, Any] = {}
    tokens = list(args)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("--") or tok == "--":
            raise ArgumentError(f"unexpected argument {tok!r}; hyperparameters are written --name=value")
        name, eq, value = tok[2:].partition("=")
        if not eq:
            if i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                value, i = tokens[i + 1], i + 1
            else:
                value = "True"
        name = name.replace("-", "_")
        if not name.isidentifier():
            raise ArgumentError(f"bad hyperparameter name {tok!r}")
        out[name] = _literal(value)
        i += 1
    return out

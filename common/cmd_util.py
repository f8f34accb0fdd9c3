"""The command-line parser of run.py and the env factories it uses (``make_env``, ``make_vec_env``)."""

from __future__ import annotations

import argparse
import ast
import os
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from common import mpi_util
from common.errors import ConfigError

VEC_ENV_KINDS = ("auto", "dummy", "subproc")
# Envs whose step costs less than one IPC round trip (~70-100 us, DESIGN.md): batch them in-process.
CHEAP_ENV_TYPES = ("classic_control", "toy_text", "envs", "phys2d", "tabular")


class ArgumentError(ConfigError):
    """A malformed command line (raised instead of argparse's print-and-exit)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise ArgumentError(message)


def _timesteps(text: str) -> int:
    """argparse type: a whole number of timesteps, written 1000000, 1e6 or 1_000_000."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number such as 1e6, got {text!r}") from None
    if not value.is_integer() or value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text}")
    return int(value)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _log_formats(text: str) -> list[str]:
    from common.logger import KNOWN_FORMATS

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
    a("--env_type", help="override the env type used to pick defaults and wrappers (atari, mujoco, ...)")
    a("--seed", help="random seed (env i of MPI rank r gets seed + 10000*r + i)", type=int, default=None)
    a("--alg", help="algorithm: a folder of algos/ (ppo2, deepq, ...) or package.module:learn; default: the "
      "--load_path file's algorithm, else ppo2", default=None)
    a("--num_timesteps", help="environment steps to train for (1e6 is accepted; 0: no training)",
      type=_timesteps, default=int(1e6))
    a("--network", help="network name (mlp, cnn, lstm, ...); default: the algorithm's choice", default=None)
    a("--hyperparams", help="TOML file of hyperparameters: top-level keys, [env_type.<type>] and [env.\"<id>\"] "
      "entries, over the shipped hyperparams/<alg>.toml and under the command line", default=None)
    a("--gamestate", help="game state to load (retro games only)", default=None)
    a("--num_env", help="number of envs stepped in parallel (default: CPU count for atari, else 1)",
      type=_positive_int, default=None)
    a("--reward_scale", help="multiply rewards by this factor before the algorithm sees them",
      type=float, default=1.0)
    a("--save_path", help="file to save the trained model to (a .zip archive)", default=None)
    a("--load_path", help="model file to load: play it with --num_timesteps=0, else continue training it",
      default=None)
    a("--save_video_interval", help="record a video every this many steps (0: never)", type=_nonneg_int,
      default=0)
    a("--save_video_length", help="length of each recorded video in steps", type=_positive_int, default=200)
    a("--log_path", help="folder for logs, monitor files and config.json (default: a new temp folder)",
      default=None)
    a("--log_format", help="comma-separated outputs: stdout,log,csv,json,tensorboard", type=_log_formats,
      default=None)
    a("--vec_env", help="auto: in-process for cheap envs, subprocesses otherwise; or dummy / subproc",
      choices=VEC_ENV_KINDS, default="auto")
    a("--in_series", help="with subproc: envs stepped in series inside each worker process",
      type=_positive_int, default=1)
    a("--no_progress", help="do not draw the progress bar (it is off anyway when stderr is not a terminal)",
      action="store_true")
    a("--eval_freq", help="evaluate the model every this many env steps (all envs and ranks; 0: never) in a "
      "separate env; results in evaluations.csv, eval/* log keys and best.zip", type=_nonneg_int, default=0)
    a("--eval_episodes", help="episodes per evaluation (default 10); with --load_path and --num_timesteps=0: "
      "evaluate the file's model and print the result", type=_positive_int, default=None)
    a("--eval_envs", help="envs of the evaluation env", type=_positive_int, default=1)
    a("--eval_stochastic", help="evaluate with sampled actions instead of the deterministic ones",
      action="store_true")
    a("--play", help="after training (or loading), run the model in the env and print episode returns",
      action="store_true")
    a("--play_episodes", help="episodes to play (0: until Ctrl-C)", type=_nonneg_int, default=5)
    a("--stochastic", help="play with sampled actions instead of the deterministic ones", action="store_true")
    a("--play_video", help="folder to write videos of the played episodes to (works without a display)",
      default=None)
    a("--no_render", help="do not open a window while playing", action="store_true")
    return p


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


# ---------------------------------------------------------------------------------------------
# env factories


class ClipActionWrapper(gym.ActionWrapper):
    """Clip Box actions into the action space (keeps the space's bounds, unlike gymnasium's ClipAction)."""

    def action(self, action: Any) -> Any:
        space = self.action_space
        return np.clip(action, space.low, space.high)


class RewardScaleWrapper(gym.RewardWrapper):
    """Multiply rewards by ``scale`` (outside Monitor, so monitor files keep the env's own units)."""

    def __init__(self, env: gym.Env, scale: float) -> None:
        super().__init__(env)
        self.scale = float(scale)

    def reward(self, reward: float) -> float:
        return reward * self.scale


def make_env(
    env_id: str,
    env_type: str,
    mpi_rank: int = 0,
    subrank: int = 0,
    reward_scale: float = 1.0,
    gamestate: str | None = None,
    flatten_dict_observations: bool = True,
    wrapper_kwargs: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    logger_dir: str | None = None,
    initializer: Callable[..., None] | None = None,
) -> gym.Env:
    """One env with the runner's wrappers: (atari base wrappers) -> Dict flattening -> Monitor ->
    (DeepMind wrappers) -> action clipping for Box -> reward scaling.

    Args:
        env_id: a registered id, or ``module:EnvId`` (the module is imported, also in subprocesses).
        env_type: from ``run_util.get_env_type``; "atari" adds the DeepMind wrappers.
        mpi_rank, subrank: name the monitor file ``<logger_dir>/<rank>.<subrank>.monitor.csv``.
        reward_scale: reward factor applied outside the Monitor.
        gamestate: retro game state (not supported: retro is not installed).
        flatten_dict_observations: flatten Dict observation spaces into one Box.
        wrapper_kwargs: passed to ``wrap_deepmind`` for atari.
        env_kwargs: passed to ``gym.make`` (for example ``render_mode``).
        logger_dir: folder for monitor files (None: no file).
        initializer: called as ``initializer(mpi_rank=, subrank=)`` first (in the worker process).
    """
    if initializer is not None:
        initializer(mpi_rank=mpi_rank, subrank=subrank)
    if gamestate is not None:
        raise ConfigError("--gamestate is for gym-retro games, which this runner does not support")
    import envs  # noqa: F401 - registers this project's envs (needed in fresh worker processes)
    from common.monitor import Monitor

    env_kwargs = dict(env_kwargs or {})
    if env_type == "atari":
        from common.atari_wrappers import make_atari, wrap_deepmind

        env = make_atari(env_id, **env_kwargs)
    else:
        env = gym.make(env_id, **env_kwargs)
    if flatten_dict_observations and isinstance(env.observation_space, gym.spaces.Dict):
        env = gym.wrappers.FlattenObservation(env)
    monitor_file = os.path.join(logger_dir, f"{mpi_rank}.{subrank}") if logger_dir else None
    env = Monitor(env, monitor_file, allow_early_resets=True)
    if env_type == "atari":
        env = wrap_deepmind(env, **(wrapper_kwargs or {}))
    if isinstance(env.action_space, gym.spaces.Box):
        env = ClipActionWrapper(env)
    if reward_scale != 1.0:
        env = RewardScaleWrapper(env, reward_scale)
    return env


def make_vec_env(
    env_id: str,
    env_type: str,
    num_env: int,
    seed: int | None,
    wrapper_kwargs: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    start_index: int = 0,
    reward_scale: float = 1.0,
    flatten_dict_observations: bool = True,
    gamestate: str | None = None,
    initializer: Callable[..., None] | None = None,
    vec_env_kind: str = "auto",
    in_series: int = 1,
    logger_dir: str | None = None,
) -> Any:
    """``num_env`` envs from ``make_env`` in a DummyVecEnv or SubprocVecEnv, seeded
    ``seed + 10000 * mpi_rank + start_index + i`` at the first reset.

    Args:
        vec_env_kind: "dummy", "subproc", or "auto" (dummy for one env or cheap env types, else subproc).
        in_series: SubprocVecEnv only: envs stepped in series per worker process.
        logger_dir: monitor-file folder; default ``logger.get_dir()``.
        (others: see ``make_env``)
    """
    from common import logger

    if num_env < 1:
        raise ValueError(f"num_env must be >= 1, got {num_env}")
    if vec_env_kind not in VEC_ENV_KINDS:
        raise ValueError(f"vec_env_kind must be one of {', '.join(VEC_ENV_KINDS)}, got {vec_env_kind!r}")
    rank = mpi_util.rank()
    logger_dir = logger_dir if logger_dir is not None else logger.get_dir()

    def make_thunk(index: int) -> Callable[[], gym.Env]:
        return lambda: make_env(
            env_id, env_type, mpi_rank=rank, subrank=index, reward_scale=reward_scale, gamestate=gamestate,
            flatten_dict_observations=flatten_dict_observations, wrapper_kwargs=wrapper_kwargs,
            env_kwargs=env_kwargs, logger_dir=logger_dir, initializer=initializer)

    fns = [make_thunk(start_index + i) for i in range(num_env)]
    kind = vec_env_kind
    if kind == "auto":
        kind = "dummy" if num_env == 1 or env_type in CHEAP_ENV_TYPES else "subproc"
    if kind == "subproc":
        from common.vec_env import SubprocVecEnv

        venv = SubprocVecEnv(fns, in_series=in_series) if in_series > 1 else SubprocVecEnv(fns)
    else:
        from common.vec_env import DummyVecEnv

        venv = DummyVecEnv(fns)
    if seed is not None:
        venv.seed(seed + 10000 * rank + start_index)
    return venv

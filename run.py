"""The training runner: ``python -m run --alg=ppo2 --env=CartPole-v1 [--hyperparameter=value ...]``.

From Python: ``import run; model = run.main(["--alg=ppo2", "--env=CartPole-v1"])``. Called with an
argument list, ``main`` raises the error (``run_util.UsageError``, ``common.serialization.ModelFileError``,
...) so an IDE shows it; called with no list (the command line) it prints one line ``run: error: ...``
and exits with status 2 (130 after Ctrl-C). TensorFlow is only imported by the algorithm.
"""

from __future__ import annotations

import os

# numpy's BLAS threads only hurt here: the numpy matrix products are the small forward passes used for
# acting, and a threaded OpenBLAS spinning against the learner on a busy 2-core machine took 7.9 ms for an
# 8x256 @ 256x256 product that takes 21-83 us on one thread. Set before numpy loads; users may override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import contextlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import gymnasium as gym

from algos import training
from common import logger, mpi_util, progress
from common.arg_parser import common_arg_parser, parse_cmdline_kwargs
from common.env_factory import make_vec_env
from common.errors import UserError
from common.play import PlayResult, has_display, play, record_video
from run_util import (
    UsageError,
    check_learn_kwargs,
    check_network,
    check_writable_dir,
    check_writable_file,
    get_alg_module,
    get_env_type,
    get_learn_function,
    get_learn_function_defaults,
)

__all__ = ["build_env", "common_arg_parser", "main", "parse_cmdline_kwargs", "play", "play_model", "train"]

RUNNER_FLAGS_FOR_LEARN = ("env", "network", "total_timesteps", "seed")


@contextlib.contextmanager
def _env_errors(what: str) -> Iterator[None]:
    """gymnasium's own errors while making an env (bad env arguments, a missing render mode) as one line."""
    try:
        yield
    except gym.error.Error as e:
        raise UsageError(f"{what}: {e}") from e


def default_network(env_type: str) -> str | None:
    """The runner's network choice for an env type: "cnn" for atari, else None (the algorithm's)."""
    return "cnn" if env_type == "atari" else None


def parse_args(argv: Sequence[str]) -> tuple[Any, dict[str, Any]]:
    """Runner flags and the extra ``--k=v`` hyperparameters, checked for obvious mistakes."""
    args, unknown = common_arg_parser().parse_known_args(list(argv))
    extra = parse_cmdline_kwargs(unknown)
    extra = {training.PARAMETER_ALIASES.get(k, k): v for k, v in extra.items()}
    clash = [k for k in extra if k in RUNNER_FLAGS_FOR_LEARN or k == "total_timesteps"]
    if clash:
        raise UsageError(f"--{clash[0]} is set by the runner; use the runner's flag instead (see --help)")
    if args.num_timesteps == 0 and args.load_path is None and args.play:
        raise UsageError("--play with --num_timesteps=0 needs --load_path=MODEL_FILE (or train first)")
    if args.load_path is not None and not os.path.isfile(args.load_path):
        raise UsageError(f"--load_path {args.load_path}: no such file")
    if args.alg is None:
        args.alg = _file_algorithm(args.load_path) if args.load_path else "ppo2"
    return args, extra


def complete_args(args: Any) -> SimpleNamespace:
    """A copy of ``args`` (any object) with every runner flag it lacks set to the command line's default."""
    defaults = vars(common_arg_parser().parse_args([]))
    given = {k: getattr(args, k) for k in dir(args) if not k.startswith("_")}
    out = SimpleNamespace(**{**defaults, **given})
    if out.alg is None:
        out.alg = _file_algorithm(out.load_path) if out.load_path else "ppo2"
    return out


def _file_algorithm(path: str) -> str:
    """The algorithm a model file was made by (checked against this project's algorithms on loading)."""
    from common.serialization import ModelFile

    found = ModelFile(path).metadata.get("algorithm")
    return found if isinstance(found, str) and found.isidentifier() else "ppo2"


def build_env(args: Any, num_env: int | None = None, env_kwargs: dict[str, Any] | None = None,
              vec_env_kind: str | None = None) -> Any:
    """The vec env for ``args`` with the env-type wrappers (atari frame stack, mujoco VecNormalize).

    Args:
        args: parsed runner flags (env, env_type, seed, alg, num_env, reward_scale, vec_env, in_series).
        num_env: override ``args.num_env`` (play uses 1).
        env_kwargs: for ``gym.make`` (play passes ``render_mode``).
        vec_env_kind: override ``args.vec_env``.
    """
    env_type, env_id = get_env_type(args.env, args.env_type)
    make_id = args.env.split(":", 1)[0] + ":" + env_id if ":" in args.env else env_id
    nenv = num_env or args.num_env or ((os.cpu_count() or 1) if env_type in ("atari", "retro") else 1)
    alg = args.alg
    kind = vec_env_kind or getattr(args, "vec_env", "auto")
    common = {"seed": args.seed, "reward_scale": args.reward_scale, "env_kwargs": env_kwargs,
                  "gamestate": args.gamestate, "vec_env_kind": kind, "in_series": getattr(args, "in_series", 1)}
    if env_type in ("atari", "retro") and alg == "deepq":
        env = make_vec_env(make_id, env_type, 1, wrapper_kwargs={"frame_stack": True}, **common)
    elif env_type in ("atari", "retro"):
        from common.vec_env import VecFrameStack

        env = VecFrameStack(make_vec_env(make_id, env_type, nenv, **common), 4)
    else:
        env = make_vec_env(make_id, env_type, nenv, flatten_dict_observations=alg != "her", **common)
        if env_type == "mujoco":
            from common.vec_env import VecNormalize

            env = VecNormalize(env)
    return env


def _resolve(args: Any, extra: dict[str, Any]) -> tuple[str, str, Any, dict[str, Any]]:
    """(env_type, env_id, learn, learn_kwargs) after defaults and overrides, all checked."""
    env_type, env_id = get_env_type(args.env, args.env_type)
    learn = get_learn_function(args.alg)
    kwargs = get_learn_function_defaults(args.alg, env_type)
    kwargs.update(extra)
    network = args.network or kwargs.pop("network", None) or default_network(env_type)
    if args.load_path is not None and args.num_timesteps > 0:
        kwargs["load_path"] = os.path.abspath(args.load_path)
        if "load_path" not in _learn_params(learn):
            raise UsageError(f"algorithm '{args.alg}' cannot continue training from --load_path "
                             "(its learn() has no load_path); use --num_timesteps=0 to play a model")
    check_network(network)
    kwargs = check_learn_kwargs(args.alg, learn, kwargs, network=network or default_network(env_type) or "mlp",
                                given=set(extra))
    kwargs["network"] = network
    return env_type, env_id, learn, kwargs


def _learn_params(learn: Any) -> set[str]:
    import inspect

    return set(inspect.signature(learn).parameters)


def _write_config(folder: str, args: Any, env_type: str, env_id: str, learn_kwargs: dict[str, Any]) -> str:
    """Write the resolved configuration to ``<folder>/config.json``; returns the path."""
    config = {
        "alg": args.alg, "env": args.env, "env_id": env_id, "env_type": env_type,
        "num_timesteps": args.num_timesteps, "seed": args.seed,
        "learn_kwargs": learn_kwargs, "runner_args": vars(args),
        "argv": getattr(args, "argv", None), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    path = os.path.join(folder, "config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1, sort_keys=True, default=repr)
    return path


def train(args: Any, extra_args: dict[str, Any]) -> tuple[Any, Any]:
    """Build the env, call the algorithm's ``learn`` and return ``(model, env)``.

    ``args`` may be any object carrying some of the runner's flags (baselines' tutorials pass a small
    class with ``env``, ``alg``, ``num_timesteps``, ``network``...): the others take their command-line
    defaults. Ctrl-C during learn: the model the algorithm registered (``algos.training.register_model``)
    is saved to ``--save_path`` when given, then KeyboardInterrupt propagates.
    """
    args = complete_args(args)
    env_type, env_id, learn, kwargs = _resolve(args, extra_args)
    network = kwargs.pop("network")
    if logger.get_dir() is not None and mpi_util.rank() == 0:
        _write_config(logger.get_dir(), args, env_type, env_id, {"network": network, **kwargs})
    video_kwargs = {"render_mode": "rgb_array"} if args.save_video_interval else None
    with _env_errors(f"making env {args.env}"):
        env = build_env(args, env_kwargs=video_kwargs)
    if args.save_video_interval and mpi_util.rank() == 0:  # under MPI rank 0 records, the others just train
        interval = args.save_video_interval
        from common.vec_env.vec_video_recorder import VecVideoRecorder

        env = VecVideoRecorder(env, os.path.join(logger.get_dir() or ".", "videos"),
                               record_video_trigger=lambda step: step % interval == 0,
                               video_length=args.save_video_length)
    logger.log(f"Training {args.alg} on {env_type}:{env_id} for {args.num_timesteps} timesteps "
               f"with {env.num_envs} env(s)")
    bar = progress.ProgressBar(args.num_timesteps, enabled=False if args.no_progress or mpi_util.rank() else None)
    progress.set_progress(bar)
    training.register_model(None)
    try:
        model = learn(env=env, network=network, total_timesteps=args.num_timesteps, seed=args.seed, **kwargs)
    except KeyboardInterrupt:
        bar.close()
        _save_after_interrupt(training.registered_model(), args.save_path)
        env.close()
        raise
    finally:
        bar.close()
        progress.set_progress(None)
    return model, env


def _save_after_interrupt(model: Any, save_path: str | None) -> None:
    if save_path and model is not None and mpi_util.rank() == 0:
        model.save(save_path)
        print(f"run: interrupted; model saved to {save_path}", file=sys.stderr)
    elif save_path:
        print("run: interrupted before the algorithm had a model; nothing saved", file=sys.stderr)
    else:
        print("run: interrupted (no --save_path given, model not saved)", file=sys.stderr)


def _play_env(args: Any) -> tuple[Any, str | None]:
    """One env (by default) for playing, rendering in a window or recording video; (env, note)."""
    note = None
    if args.play_video:
        env_kwargs: dict[str, Any] | None = {"render_mode": "rgb_array"}
    elif args.no_render:
        env_kwargs = None
    elif has_display():
        env_kwargs = {"render_mode": "human"}
    else:
        env_kwargs = None
        note = "no display found (DISPLAY/WAYLAND_DISPLAY unset): playing without a window; " \
               "use --play_video=FOLDER to record the episodes"
    play_args = SimpleNamespace(**{**vars(args), "num_env": 1})
    with _env_errors(f"making env {args.env} for play"):
        env = build_env(play_args, num_env=1, env_kwargs=env_kwargs, vec_env_kind="dummy")
        if args.play_video:
            env = record_video(env, args.play_video, args.save_video_length)
    return env, note


def _copy_normalization(src: Any, dst: Any) -> None:
    """Give the play env the training env's VecNormalize statistics, frozen."""
    from common.vec_env import unwrap_vec_normalize

    vn_src, vn_dst = unwrap_vec_normalize(src), unwrap_vec_normalize(dst)
    if vn_src is not None and vn_dst is not None:
        vn_dst.set_state(vn_src.get_state())
        vn_dst.training = False


def play_model(model: Any, args: Any, train_env: Any = None) -> PlayResult:
    """Play ``model`` in a fresh play env built from ``args`` (what ``--play`` does)."""
    env, note = _play_env(args)
    try:
        if note:
            print(note)
        if train_env is not None:
            _copy_normalization(train_env, env)
        return play(model, env, episodes=args.play_episodes, deterministic=not args.stochastic)
    finally:
        env.close()


def _load_model(args: Any, env: Any) -> Any:
    """The model of ``--load_path``: its algorithm comes from the file (``--alg``, when given, must agree)."""
    from algos.base import load_model

    if ":" in (args.alg or ""):  # an algorithm outside this project loads its own files
        return get_alg_module(args.alg).load(args.load_path, env)
    return load_model(args.load_path, env, network=args.network, algorithm=args.alg)


def _run(argv: Sequence[str]) -> Any:
    args, extra = parse_args(argv)
    args.argv = list(argv)
    # every cheap check before anything slow
    _resolve(args, extra)
    if args.save_path:
        args.save_path = check_writable_file(args.save_path, "--save_path")
    if args.play_video:
        args.play_video = check_writable_dir(args.play_video, "--play_video")
    rank = mpi_util.rank()
    log_dir = _shared_log_dir(check_writable_dir(args.log_path, "--log_path") if args.log_path else None)
    logger.configure(log_dir, format_strs=args.log_format)
    if rank == 0 and (args.log_format is not None and "stdout" not in args.log_format):
        print(f"Logging to {logger.get_dir()}")
    if args.num_timesteps == 0 and args.load_path:
        env_type, env_id, _, kwargs = _resolve(args, extra)
        if rank == 0:
            _write_config(logger.get_dir(), args, env_type, env_id, kwargs)
        if args.play and rank == 0:  # under MPI only rank 0 plays (one window, one set of videos)
            env, note = _play_env(args)
            try:
                model = _load_model(args, env)
                if note:
                    print(note)
                play(model, env, episodes=args.play_episodes, deterministic=not args.stochastic)
            finally:
                env.close()
        else:
            with _env_errors(f"making env {args.env}"):
                env = build_env(args)
            try:
                model = _load_model(args, env)
            finally:
                env.close()
        _save(model, args.save_path, rank)
        return model
    model, env = train(args, extra)
    try:
        _save(model, args.save_path, rank)
        if rank == 0 and logger.get_dir() is not None:
            _write_learning_curve(logger.get_dir())
        if args.play and rank == 0:
            play_model(model, args, train_env=env)
    finally:
        env.close()
    return model


def _shared_log_dir(log_dir: str | None) -> str | None:
    """Under MPI every rank logs into rank 0's folder (its monitor files go there); else ``log_dir``."""
    if mpi_util.size() == 1:
        return log_dir
    chosen = log_dir or os.environ.get("RUNNER_LOGDIR") or logger.default_log_dir()
    return mpi_util.get_comm().bcast(chosen if mpi_util.is_root() else None, root=0)


def _write_learning_curve(log_dir: str) -> None:
    """Draw ``learning_curve.png`` into the log folder (skipped, with a note, when it cannot be drawn)."""
    from common.plot_util import write_final_curve

    try:
        path = write_final_curve(log_dir)
    except (ImportError, OSError, ValueError) as e:
        logger.warn(f"learning curve not written: {e}")
        return
    if path:
        logger.log(f"Learning curve: {path}")


def _save(model: Any, save_path: str | None, rank: int) -> None:
    if save_path and rank == 0:
        model.save(save_path)
        logger.log(f"Saved model to {save_path}")


def main(args: Sequence[str] | None = None) -> Any:
    """Run the command line ``args`` and return the model.

    Args:
        args: the arguments (without the program name). None means the real command line: errors
            then print one line ``run: error: ...`` and exit 2, Ctrl-C exits 130. With a list (from
            Python) errors are raised, so an IDE shows them.
    """
    if args is not None:
        return _run(args)
    with mpi_util.abort_on_failure():  # under mpiexec, one rank failing ends them all, not a hang
        try:
            return _run(sys.argv[1:])
        except UserError as e:
            from common.vec_env import EnvWorkerError

            text = str(e).strip().splitlines() or [type(e).__name__]
            print(f"run: error: {text[0]}", file=sys.stderr)
            if isinstance(e, EnvWorkerError) and len(text) > 1:
                print("\n".join(text[1:]), file=sys.stderr)
            sys.exit(2)
        except KeyboardInterrupt:
            sys.exit(130)


if __name__ == "__main__":
    main()

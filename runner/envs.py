"""The envs of a run: the training vec env, and the separate ones for evaluation and play."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

import gymnasium as gym

from algos.base import ALIASES
from algos.capabilities import keeps_dict_observations
from common.headless_render import check_backend, renders_with_gl
from run_util import UsageError
from runner.config import CPU_COUNT_ENV_TYPES, RunConfig
from runner.env_factory import make_vec_env
from runner.play import episode_video_wrapper, has_display, renders_text

EVAL_SEED_OFFSET = 5000  # evaluation and play envs are seeded seed + 5000 + i (training's are seed + i)


@contextlib.contextmanager
def env_errors(what: str) -> Iterator[None]:
    """gymnasium's own errors while making an env (bad env arguments, a missing render mode) as one line."""
    try:
        yield
    except gym.error.Error as e:
        raise UsageError(f"{what}: {e}") from e


def check_render_mode(env_kwargs: dict[str, Any]) -> None:
    """UsageError when the env would render in a window (``render_mode='human'``) and there is no display:
    opening one then crashes the process."""
    if env_kwargs.get("render_mode") == "human" and not has_display():
        raise UsageError("render_mode='human' opens a window, and there is no display (DISPLAY/WAYLAND_DISPLAY "
                         "unset): use --play --play_video=FOLDER to record the episodes, or leave render_mode out")


def build_env(config: RunConfig, num_env: int | None = None, env_kwargs: dict[str, Any] | None = None,
              vec_env_kind: str | None = None, separate: bool = False, wrappers: Sequence[str] = ()) -> Any:
    """The vec env of a run with its wrappers (atari: frame stack; VecNormalize when the config says so).

    Args:
        config: the resolved run (env id and type, num_env; flags seed, alg, reward_scale, vec_env, in_series).
        num_env: override the run's num_env (play uses 1).
        env_kwargs: for ``gym.make`` (play passes ``render_mode``).
        vec_env_kind: override ``--vec_env``.
        separate: an env beside training (evaluation, play): no monitor files, seeds after training's.
        wrappers: ``--wrapper`` specs after the run's own (play's video recorder).
    """
    args, env_type = config.args, config.env_type
    nenv = num_env or config.num_env or ((os.cpu_count() or 1) if env_type in CPU_COUNT_ENV_TYPES else 1)
    env_kwargs = {**config.env_kwargs, **(env_kwargs or {})}
    check_render_mode(env_kwargs)
    common = {"seed": args.seed, "reward_scale": args.reward_scale, "user_wrappers": [*config.wrappers, *wrappers],
              "env_kwargs": env_kwargs,
              "gamestate": args.gamestate, "vec_env_kind": vec_env_kind or args.vec_env, "in_series": args.in_series,
              "flatten_dict_observations": not keeps_dict_observations(ALIASES.get(args.alg, args.alg), config.learn)}
    if separate:
        common.update(logger_dir="", start_index=EVAL_SEED_OFFSET)
    elif args.resume:
        common["monitor_append"] = True  # a resumed run continues its monitor files
    if env_type in ("atari", "retro") and args.alg == "deepq":
        return make_vec_env(config.make_id, env_type, 1, wrapper_kwargs={"frame_stack": True}, **common)
    if env_type in ("atari", "retro"):
        from common.vec_env import VecFrameStack

        return VecFrameStack(make_vec_env(config.make_id, env_type, nenv, **common), 4)
    env = make_vec_env(config.make_id, env_type, nenv, **common)
    if config.vec_normalize:
        from common.vec_env import VecNormalize

        # gamma 0.99 whatever the agent's (baselines); the agent's gamma, as rl-baselines3-zoo passes it, did
        # worse on the entries it changes (bench/README.md "trpo Hopper with gamma 0.995")
        env = VecNormalize(env)
    return env


def eval_env(config: RunConfig) -> Any:
    """The evaluation env: ``--eval_envs`` envs in this process, beside training."""
    with env_errors(f"making env {config.args.env} for evaluation"):
        return build_env(config, num_env=config.args.eval_envs, vec_env_kind="dummy", separate=True)


def play_env(config: RunConfig) -> tuple[Any, str | None]:
    """One env for playing, rendering in a window or recording video; (env, note)."""
    args, note = config.args, None
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
    wrappers = [episode_video_wrapper(args.play_video, config.env_id)] if args.play_video else []
    with env_errors(f"making env {args.env} for play"):
        env = build_env(config, num_env=1, env_kwargs=env_kwargs, separate=True, wrappers=wrappers,
                        vec_env_kind=video_env_kind(config, "dummy") if args.play_video else "dummy")
    return env, None if note and renders_text(env) else note


def video_env_kind(config: RunConfig, kind: str) -> str:
    """The vec env kind of an env recording video: envs that render with OpenGL render in worker processes
    (Mesa's software OpenGL and TensorFlow crash in one process), the others as ``kind`` says."""
    return "subproc" if renders_with_gl(config.env_type) else kind


def check_video_rendering(config: RunConfig) -> None:
    """With ``--play_video`` or ``--save_video_interval``, an env that renders with OpenGL: check that it can,
    before anything is trained (``common.headless_render.RenderBackendError``, one line, otherwise)."""
    args = config.args
    if (args.play_video or args.save_video_interval) and renders_with_gl(config.env_type):
        check_backend(config.env_id)

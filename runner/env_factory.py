"""The runner's env factories: ``make_env`` (one env with the runner's wrappers) and ``make_vec_env``
(a batch of them in a DummyVecEnv or SubprocVecEnv, seeded per MPI rank and env index)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from common.env_vars import MAX_WORKERS, env_text
from common.errors import ConfigError
from common.games.parallel import ENV_TYPE as MULTIAGENT
from common.headless_render import choose_backend
from common.memory import available_memory
from common.minatar_envs import MINATAR_ENV_TYPE, register_minatar_envs
from common.mpi import mpi_launch, mpi_util
from common.robotics_envs import ROBOTICS_ENV_TYPE, register_robotics_envs
from common.wrappers.action_mask import wrap_action_masks
from common.wrappers.user_wrappers import apply_parallel_wrappers, apply_wrappers
from runner.cli import VEC_ENV_KINDS

# Envs whose step costs less than one IPC round trip (~70-100 us, DESIGN.md): batch them in-process.
# (A MinAtar step took ~13 us.)
CHEAP_ENV_TYPES = ("classic_control", "toy_text", "envs", "phys2d", "tabular", "minatar")


# Bounds on the worker processes of one SubprocVecEnv: 4 per CPU core (at least 16), and at most half the
# available memory at WORKER_MB each (a CartPole worker measured 32 MB resident, 10 MB of it its own;
# 64 of them took 2.9 GB). RUNNER_MAX_WORKERS replaces the bound.
WORKERS_PER_CPU, MIN_WORKER_LIMIT, WORKER_MB = 4, 16, 50


def available_cpus() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def auto_in_series(num_env: int) -> int:
    """Envs per SubprocVecEnv worker when ``--in_series`` is not given: the fewest that keep the workers within
    this process's share of the CPU cores (the cores divided by the MPI ranks on this host), one worker per
    env where there are cores enough, or where no divisor of ``num_env`` keeps half of the cores busy. A step
    then wakes one process per core instead of one per env: 8 Pong envs in 2 workers of 4 on 2 cores, the same
    numbers as 8 workers, ran ppo2's 10,240 steps 1.35x faster (bench/README.md)."""
    cores = max(1, available_cpus() // max(1, mpi_launch.launcher_local_size() or 1))
    k = next(k for k in range(1, num_env + 1) if num_env % k == 0 and num_env // k <= cores)
    return k if 2 * (num_env // k) > min(cores, num_env) else 1  # no divisor fills half the cores: one per env


def max_workers() -> tuple[int, str]:
    """How many SubprocVecEnv worker processes this machine allows, and why (for the error message)."""
    override = env_text(MAX_WORKERS)
    if override:
        if not override.isdigit() or int(override) < 1:
            raise ConfigError(f"RUNNER_MAX_WORKERS={override!r} must be a whole number >= 1")
        return int(override), "RUNNER_MAX_WORKERS"
    cpus = available_cpus()
    limit = max(MIN_WORKER_LIMIT, WORKERS_PER_CPU * cpus)
    why = f"{WORKERS_PER_CPU} per CPU core, {cpus} cores"
    available = _available_memory_mb()
    if available is not None and available // (2 * WORKER_MB) < limit:
        limit = max(1, available // (2 * WORKER_MB))
        why = f"half of the {available} MB of available memory at about {WORKER_MB} MB each"
    return limit, why


def _available_memory_mb() -> int | None:
    available = available_memory()
    return None if available is None else available // 2**20


def check_worker_count(num_env: int, in_series: int = 1) -> None:
    """ConfigError when ``num_env`` envs, ``in_series`` per worker, need more worker processes than
    ``max_workers()`` allows; the message says how to need fewer."""
    workers = num_env // max(1, in_series)
    limit, why = max_workers()
    if workers > limit:
        per = next(k for k in range(-(-num_env // limit), num_env + 1) if num_env % k == 0)
        raise ConfigError(f"--num_env={num_env} in subprocesses needs {workers} worker processes; this machine "
                          f"allows {limit} ({why}): add --in_series={per} (envs stepped in series per worker), "
                          "use --vec_env=dummy, or set RUNNER_MAX_WORKERS")


# Files a SubprocVecEnv keeps open in this process per worker (its pipe, its process sentinel, ...: 3.2
# measured) and a DummyVecEnv per env writing a monitor file; and a margin for what opens later.
FILES_PER_WORKER, FILES_PER_MONITOR, SPARE_FILES = 4, 1, 64


def open_file_limit() -> int | None:
    """The soft limit on this process's open files (``ulimit -n``), or None when unlimited or unknown."""
    try:
        import resource
    except ImportError:
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def _open_files() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def check_open_files(num_env: int, workers: int, monitor_files: int) -> None:
    """ConfigError, before any env starts, when ``workers`` subprocess workers and ``monitor_files`` monitor
    files in this process would pass the open-file limit; the message says the limit and what to do."""
    limit = open_file_limit()
    needed = workers * FILES_PER_WORKER + monitor_files * FILES_PER_MONITOR
    if limit is None or _open_files() + needed + SPARE_FILES <= limit:
        return
    what = f"{FILES_PER_WORKER} per worker process" if workers else f"{FILES_PER_MONITOR} per monitor file"
    fewer = "use fewer envs, --in_series=K (K envs per worker)" if workers else "use fewer envs"
    raise ConfigError(f"--num_env={num_env} needs about {needed} open files ({what}); this process may open "
                      f"{limit} (ulimit -n): {fewer}, or raise the limit with ulimit -n")


class ClipActionWrapper(gym.ActionWrapper):
    """Clip Box actions into the action space (keeps the space's bounds, unlike gymnasium's ClipAction)."""

    def action(self, action: Any) -> Any:
        space = self.action_space
        return np.minimum(np.maximum(action, space.low), space.high)  # np.clip, minus its overhead


class RewardScaleWrapper(gym.RewardWrapper):
    """Multiply rewards by ``scale`` (outside Monitor, so monitor files keep the env's own units)."""

    def __init__(self, env: gym.Env, scale: float) -> None:
        super().__init__(env)
        self.scale = float(scale)

    def reward(self, reward: float) -> float:
        return reward * self.scale


def route_mujoco_warnings() -> None:
    """Send MuJoCo's warnings (deprecated model attributes of gymnasium's XML files) to the ``mujoco``
    Python logger, silent by default, instead of a MUJOCO_LOG.TXT file in the working folder."""
    import logging

    import mujoco

    log = logging.getLogger("mujoco")
    mujoco.set_mju_user_warning(lambda message: log.info("%s", message))


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
    user_wrappers: Sequence[str] = (),
    monitor_append: bool = False,
) -> gym.Env:
    """One env with the runner's wrappers: (atari base wrappers) -> the user's wrappers -> action masks
    into the info (``common.wrappers.action_mask``) -> Dict flattening -> Monitor -> (DeepMind wrappers) -> action
    clipping for Box -> reward scaling.

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
        user_wrappers: ``--wrapper`` specs (``common.wrappers.user_wrappers``), inside the Monitor: part of the env.
        monitor_append: continue existing monitor files (a resumed run) instead of starting them anew.
    """
    if initializer is not None:
        initializer(mpi_rank=mpi_rank, subrank=subrank)
    choose_backend()  # before MuJoCo or pygame load: off-screen rendering without a display
    if gamestate is not None:
        raise ConfigError("--gamestate is for gym-retro games, which this runner does not support")
    import envs  # noqa: F401 - registers this project's envs (needed in fresh worker processes)
    from common.wrappers.monitor import Monitor

    env_kwargs = dict(env_kwargs or {})
    if env_type == "atari":
        from common.wrappers.atari_wrappers import make_atari, wrap_deepmind

        env = make_atari(env_id, **env_kwargs)
    elif env_type == "pettingzoo":
        from common.games.pettingzoo import make_env as make_pettingzoo_env

        env = make_pettingzoo_env(env_id, **env_kwargs)
    else:
        if env_type == "mujoco":
            route_mujoco_warnings()
        if env_type == ROBOTICS_ENV_TYPE:  # registered in this (worker) process too
            register_robotics_envs()
        if env_type == MINATAR_ENV_TYPE:  # registered in this (worker) process too
            register_minatar_envs()
        env = gym.make(env_id, **env_kwargs)
    env = apply_wrappers(env, user_wrappers)
    env = wrap_action_masks(env)  # action_masks() or a Dict "action_mask" key -> info["action_mask"]
    if flatten_dict_observations and isinstance(env.observation_space, gym.spaces.Dict):
        env = gym.wrappers.FlattenObservation(env)
    monitor_file = os.path.join(logger_dir, f"{mpi_rank}.{subrank}") if logger_dir else None
    env = Monitor(env, monitor_file, allow_early_resets=True, append=monitor_append)
    if env_type == "atari":
        env = wrap_deepmind(env, **(wrapper_kwargs or {}))
    if isinstance(env.action_space, gym.spaces.Box):
        env = ClipActionWrapper(env)
    if reward_scale != 1.0:
        env = RewardScaleWrapper(env, reward_scale)
    return env


def make_agent_vec_env(spec: str, num_env: int, reward_scale: float = 1.0, env_kwargs: dict[str, Any] | None = None,
                       user_wrappers: Sequence[str] = ()) -> Any:
    """``num_env`` PettingZoo parallel envs of ``spec``, each wrapped by the ``--wrapper`` functions of parallel
    envs (``common.wrappers.user_wrappers``), in an ``AgentVecEnv`` (one row per agent), in this process."""
    from common.games.parallel import make_parallel
    from common.vec_env.agent_vec_env import AgentVecEnv

    choose_backend()  # before pygame loads (butterfly envs)
    kwargs, wrappers = dict(env_kwargs or {}), tuple(user_wrappers)
    return AgentVecEnv([lambda: apply_parallel_wrappers(make_parallel(spec, **kwargs), wrappers)] * num_env, spec,
                       reward_scale)


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
    in_series: int | None = None,
    logger_dir: str | None = None,
    user_wrappers: Sequence[str] = (),
    monitor_append: bool = False,
) -> Any:
    """``num_env`` envs from ``make_env`` in a DummyVecEnv or SubprocVecEnv, seeded
    ``seed + 10000 * mpi_rank + start_index + i`` at the first reset.

    Args:
        vec_env_kind: "dummy", "subproc", "envpool" (``common.vec_env.envpool_vec_env``), or "auto" (dummy for one
            env or cheap env types, else subproc).
        in_series: SubprocVecEnv only: envs stepped in series per worker process (None: ``auto_in_series``).
        logger_dir: monitor-file folder; default ``logger.get_dir()``.
        (others: see ``make_env``)
    """
    from common.logs import logger

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
            env_kwargs=env_kwargs, logger_dir=logger_dir, initializer=initializer, user_wrappers=tuple(user_wrappers),
            monitor_append=monitor_append)

    if vec_env_kind == "envpool":
        from common.vec_env.envpool_vec_env import make_envpool_vec_env

        return make_envpool_vec_env(
            env_id, env_type, num_env, None if seed is None else seed + 10000 * rank + start_index,
            wrapper_kwargs=wrapper_kwargs, env_kwargs=env_kwargs, reward_scale=reward_scale, user_wrappers=user_wrappers,
            monitor_files=[os.path.join(logger_dir, f"{rank}.{start_index + i}") for i in range(num_env)] if logger_dir
            else None, monitor_append=monitor_append)
    if env_type == MULTIAGENT:
        venv = make_agent_vec_env(env_id, num_env, reward_scale, env_kwargs, user_wrappers)
        if seed is not None:
            venv.seed(seed + 10000 * rank + start_index)
        return venv
    fns = [make_thunk(start_index + i) for i in range(num_env)]
    kind = vec_env_kind
    if kind == "auto":
        kind = "dummy" if num_env == 1 or env_type in CHEAP_ENV_TYPES else "subproc"
    if kind == "subproc":
        from common.vec_env import SubprocVecEnv

        if in_series is None:
            in_series = auto_in_series(num_env)
        check_worker_count(num_env, in_series)
        check_open_files(num_env, num_env // in_series, 0)
        venv = SubprocVecEnv(fns, in_series=in_series) if in_series > 1 else SubprocVecEnv(fns)
    else:
        from common.vec_env import DummyVecEnv

        check_open_files(num_env, 0, num_env if logger_dir else 0)
        venv = DummyVecEnv(fns)
    if seed is not None:
        venv.seed(seed + 10000 * rank + start_index)
    return venv

"""EnvpoolVecEnv: a batch of envpool's C++ envs (one pool, its own threads) behind the runner's VecEnv contract.

A finished env is reset in the same step (``infos[i]["terminal_observation"]``, ``"TimeLimit.truncated"``),
episodes are recorded as the runner's Monitor records them (``infos[i]["episode"]``, one monitor file per
env; an Atari episode is the whole game, its return the unclipped score), rewards are scaled after that and
Box actions clipped into their space. Atari frames are laid out height x width x frames, as the runner's
Atari wrappers give them.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from common.vec_env.base import Indices, VecEnv, VecObs, VecStepReturn
from common.vec_env.envpool_tasks import (
    EnvpoolError,
    check_settings,
    import_envpool,
    not_covered,
    task_id,
    task_settings,
)
from common.wrappers.monitor import ResultsWriter

# envpool's config entries that are the pool's, not the env's (left out of the settings a user may give)
POOL_CONFIG = {"num_envs", "batch_size", "num_threads", "max_num_players", "thread_affinity_offset", "base_path",
               "seed", "env_seed", "gym_reset_return_info"}


class Episodes:
    """Each env's episode in progress; at its end ``{"r", "l", "t"}`` and a row of its monitor file.

    Args:
        num_envs: envs watched.
        files: one monitor file name per env (without ``.monitor.csv``), or None for no files.
        env_id: the env id written in the files' header.
        append: continue existing files (a resumed run).
    """

    def __init__(self, num_envs: int, files: Sequence[str] | None, env_id: str, append: bool = False) -> None:
        self.t_start = time.time()
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        header = {"t_start": self.t_start, "env_id": env_id}
        self.writers = [ResultsWriter(f, header, append=append) for f in files or ()]
        if self.writers:
            self.t_start = float(self.writers[0].header.get("t_start", self.t_start))

    def add(self, rewards: np.ndarray, ended: np.ndarray, infos: list[dict]) -> None:
        """Count one step of every env; the envs where ``ended`` get ``infos[i]["episode"]``."""
        self.returns += rewards
        self.lengths += 1
        for i in np.flatnonzero(ended):
            episode = {"r": round(float(self.returns[i]), 6), "l": int(self.lengths[i]),
                       "t": round(time.time() - self.t_start, 6)}
            infos[i]["episode"] = episode
            if self.writers:
                self.writers[i].write_row(episode)
        self.returns[ended] = 0.0
        self.lengths[ended] = 0

    def restart(self) -> None:
        """Drop the episodes in progress (every env was reset)."""
        self.returns[:] = 0.0
        self.lengths[:] = 0

    def close(self) -> None:
        """Close the monitor files."""
        for writer in self.writers:
            writer.close()


def _channels_last(space: gym.Space) -> gym.Space:
    """envpool's frames (frames, height, width) as the runner's (height, width, frames)."""
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 3:
        return gym.spaces.Box(np.moveaxis(space.low, 0, -1), np.moveaxis(space.high, 0, -1), dtype=space.dtype)
    return space


def _float32_actions(space: gym.Space) -> gym.Space:
    """envpool's float64 Box actions as gymnasium's float32 ones (the spaces a model file records)."""
    if isinstance(space, gym.spaces.Box) and space.dtype == np.float64:
        return gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32), dtype=np.float32)
    return space


class EnvpoolVecEnv(VecEnv):
    """``num_envs`` envs of envpool's ``task`` (env ``i`` seeded ``seed + i``) with the runner's VecEnv contract.

    Args:
        task: envpool's task id (``Pong-v5``, ``HalfCheetah-v5``, ``CartPole-v1``).
        num_envs: envs in the pool.
        seed: seed of env 0 (None: drawn).
        settings: envpool's keyword arguments for the task (``envpool_tasks.task_settings``).
        env_id: the runner's env id (for monitor files).
        reward_scale: reward factor applied after the episode returns are counted.
        monitor_files: one monitor file name per env (without ``.monitor.csv``), or None.
        monitor_append: continue existing monitor files.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"]}  # frames per second: the video's default

    def __init__(self, task: str, num_envs: int, seed: int | None = None, settings: dict[str, Any] | None = None,
                 env_id: str | None = None, reward_scale: float = 1.0, monitor_files: Sequence[str] | None = None,
                 monitor_append: bool = False) -> None:
        self._envpool = import_envpool()
        self.task = task
        self.settings = dict(settings or {})
        self.render_mode = self.settings.get("render_mode")
        self._pool: Any = None
        self._pool_seed = _drawn_seed() if seed is None else int(seed)
        self._used = False
        self._make_pool(num_envs)
        self._atari = "episodic_life" in self._pool.config  # Atari: whole games, unclipped scores
        space = self._pool.observation_space
        self._frames = isinstance(space, gym.spaces.Box) and len(space.shape) == 3
        super().__init__(num_envs, _channels_last(space), _float32_actions(self._pool.action_space))
        self._all = np.arange(num_envs, dtype=np.int32)
        self._clip = isinstance(self.action_space, gym.spaces.Box)
        self.reward_scale = float(reward_scale)
        self.episodes = Episodes(num_envs, monitor_files, env_id or task, append=monitor_append)
        self._actions: Any = None
        self.action_space.seed(self._pool_seed)

    def _make_pool(self, num_envs: int) -> None:
        if self._pool is not None:
            self._pool.close()
        with warnings.catch_warnings():  # gymnasium's note on float64 bounds of envpool's float32 spaces
            warnings.filterwarnings("ignore", message=".*precision lowered", category=UserWarning)
            self._pool = self._envpool.make_gymnasium(self.task, num_envs=num_envs, seed=self._pool_seed,
                                                      **self.settings)
            self._pool.observation_space, self._pool.action_space  # noqa: B018 - built here, under the filter
        self._used = False

    def _obs(self, obs: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(obs, 1, -1)) if self._frames else obs

    def seed(self, seed: int | None = None) -> list[int | None]:
        """Env ``i`` starts from ``seed + i`` at the next ``reset()`` (envpool seeds when it builds the pool:
        it is built again unless it already has that seed and was not reset yet)."""
        self._check_open()
        if seed is not None and (int(seed) != self._pool_seed or self._used):
            self._pool_seed = int(seed)
            self._make_pool(self.num_envs)
        if seed is not None:
            self.action_space.seed(int(seed))
        return [self._pool_seed + i for i in range(self.num_envs)]

    def reset(self) -> VecObs:
        self._check_open()
        obs, _ = self._pool.reset()
        self._used = True
        self.waiting = False
        self.episodes.restart()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return self._obs(obs)

    def step_async(self, actions: np.ndarray | Sequence[Any]) -> None:
        self._check_open()
        self._check_actions(actions)
        actions = np.asarray(actions)
        if self._clip:
            actions = np.minimum(np.maximum(actions, self.action_space.low), self.action_space.high)
        self._actions = actions
        self.waiting = True

    def step_wait(self) -> VecStepReturn:
        self._take_pending_step()
        actions, self._actions = self._actions, None
        obs, rewards, terminated, truncated, info = self._pool.step(actions)
        obs = self._obs(obs)
        dones = terminated | truncated
        infos: list[dict] = [{} for _ in range(self.num_envs)]
        if self._atari:  # an episode is the whole game (not a life); its return the unclipped score
            self.episodes.add(info["reward"], info["terminated"].astype(bool) | truncated, infos)
        else:
            self.episodes.add(rewards, dones, infos)
        if dones.any():
            self._restart(obs, actions, dones, terminated, truncated, infos)
        rewards = rewards.astype(np.float32)
        if self.reward_scale != 1.0:
            rewards *= self.reward_scale
        return obs, rewards, dones, infos

    def _restart(self, obs: np.ndarray, actions: np.ndarray, dones: np.ndarray, terminated: np.ndarray,
                 truncated: np.ndarray, infos: list[dict]) -> None:
        """Reset the finished envs now, their last observation in the info: envpool resets a finished env at
        its next step (ignoring the action), so they alone are stepped again. (Its ``reset(ids)`` would restart
        an Atari game after a life lost.)"""
        ids = np.flatnonzero(dones).astype(np.int32)
        for i in ids:
            infos[i]["terminal_observation"] = obs[i].copy()
            infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        first, *_, info = self._pool.step(actions[ids], ids)
        obs[info["env_id"]] = self._obs(first)

    def close_extras(self) -> None:
        self._pool.close()
        self.episodes.close()

    def get_images(self) -> list[np.ndarray]:
        self._check_open()
        if self.render_mode != "rgb_array":
            raise ValueError("envpool renders only when made with render_mode='rgb_array'")
        return list(self._pool.render(env_ids=self._all))

    def get_attr(self, name: str, indices: Indices = None) -> list[Any]:
        self._check_open()
        if name not in ("render_mode", "metadata", "reward_scale", "task"):
            raise AttributeError(f"envpool's envs offer no attribute {name!r} to the runner")
        return [getattr(self, name) for _ in self._indices(indices)]

    def set_attr(self, name: str, value: Any, indices: Indices = None) -> None:
        raise AttributeError(f"envpool's envs take no attribute {name!r} from the runner")

    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None, **method_kwargs: Any) -> list[Any]:
        raise AttributeError(f"envpool's envs offer no method {method_name!r} to the runner")

    def env_is_wrapped(self, wrapper_class: type, indices: Indices = None) -> list[bool]:
        return [False for _ in self._indices(indices)]


def _drawn_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1)[0] >> 1)


def make_envpool_vec_env(env_id: str, env_type: str, num_env: int, seed: int | None, *,
                         wrapper_kwargs: dict[str, Any] | None = None, env_kwargs: dict[str, Any] | None = None,
                         reward_scale: float = 1.0, user_wrappers: Sequence[str] = (),
                         monitor_files: Sequence[str] | None = None, monitor_append: bool = False) -> EnvpoolVecEnv:
    """The runner's ``env_id`` (of ``env_type``) as ``num_env`` envpool envs, env ``i`` seeded ``seed + i``;
    EnvpoolError (one line) when envpool is missing, does not cover the env, or does not take a setting."""
    if user_wrappers:
        raise EnvpoolError("--wrapper wraps gymnasium envs; envpool's envs take none: leave out --vec_env=envpool")
    task = task_id(env_id, env_type)
    envpool = import_envpool()
    if task not in envpool.list_all_envs():
        raise not_covered(env_id)
    settings = task_settings(env_type, wrapper_kwargs, env_kwargs)
    check_settings(task, settings, set(envpool.make_spec(task).config._fields) - POOL_CONFIG)
    return EnvpoolVecEnv(task, num_env, seed, settings, env_id=env_id, reward_scale=reward_scale,
                         monitor_files=monitor_files, monitor_append=monitor_append)

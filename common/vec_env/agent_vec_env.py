"""AgentVecEnv: PettingZoo parallel envs stepped in this process, one row per agent of each env, so that
one policy acts for every agent (parameter sharing); the layout of the rows is ``common.games.parallel``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from common.games.parallel import AgentLayout, AgentRows
from common.vec_env.base import Indices, VecEnv, VecObs, VecStepReturn
from common.vec_env.dummy_vec_env import DummyVecEnv, env_failure


class AgentVecEnv(VecEnv):
    """``len(env_fns)`` PettingZoo parallel envs as ``len(env_fns) * agents`` rows: row ``e * agents + k`` is
    agent ``k`` (``possible_agents`` order) of env ``e``. Each row's episode is its agent's: it ends when the
    agent leaves or the env's episode ends (``info["episode"]`` with the agent's ``"group"``; the row that
    ends the env's episode also carries the ``"team"`` return, the sum over its agents).

    Args:
        env_fns: callables that each build a new PettingZoo ``ParallelEnv``.
        spec: the env's name in error messages.
        reward_scale: factor on the rewards the rows return (episode returns stay in the env's units).
    """

    def __init__(self, env_fns: Sequence[Callable[[], Any]], spec: str = "the env", reward_scale: float = 1.0) -> None:
        envs = []
        for i, fn in enumerate(env_fns):
            try:
                envs.append(fn())
            except (Exception, SystemExit) as e:
                for env in envs:
                    env.close()
                raise env_failure(i, e) from e
        self.layout = AgentLayout(envs[0], spec)
        self.per_env = len(self.layout.agents)
        self.envs = [AgentRows(env, self.layout, reward_scale) for env in envs]
        self.agent_groups = tuple(dict.fromkeys(self.layout.groups))
        super().__init__(len(envs) * self.per_env, self.layout.observation_space, self.layout.action_space)
        self._env_seeds: list[int | None] = [None] * len(envs)
        self._actions: Any = None

    def seed(self, seed: int | None = None) -> list[int | None]:
        """Seed env ``e`` with ``seed + e`` at the next ``reset()`` and the rows' action spaces."""
        self._check_open()
        self._env_seeds = [None if seed is None else int(seed) + e for e in range(len(self.envs))]
        if seed is not None:
            self.action_space.seed(int(seed))
        return [s for s in self._env_seeds for _ in range(self.per_env)]

    def _batch(self, rows: list[np.ndarray]) -> np.ndarray:
        return np.stack(rows).astype(self.observation_space.dtype, copy=False)

    def reset(self) -> VecObs:
        self._check_open()
        seeds, self._env_seeds = self._env_seeds, [None] * len(self.envs)
        rows: list[np.ndarray] = []
        for e, env in enumerate(self.envs):
            try:
                obs, infos = env.reset(seed=seeds[e])
            except (Exception, SystemExit) as err:
                raise env_failure(e, err) from err
            rows += obs
            self.reset_infos[e * self.per_env:(e + 1) * self.per_env] = infos
        self.waiting = False
        return self._batch(rows)

    step_async = DummyVecEnv.step_async  # the actions wait for step_wait, as in DummyVecEnv

    def step_wait(self) -> VecStepReturn:
        self._take_pending_step()
        actions, self._actions = self._actions, None
        k = self.per_env
        rows: list[np.ndarray] = []
        rews, dones, infos = [], [], []
        for e, env in enumerate(self.envs):
            try:
                obs, rew, done, info, reset_info = env.step(actions[e * k:(e + 1) * k])
            except (Exception, SystemExit) as err:
                raise env_failure(e, err) from err
            rows += obs
            rews.append(rew)
            dones.append(done)
            infos += info
            for j in np.flatnonzero(done):
                self.reset_infos[e * k + j] = reset_info[j]
        return self._batch(rows), np.concatenate(rews), np.concatenate(dones), infos

    def _env_of(self, indices: Indices) -> list[tuple[int, AgentRows]]:
        return [(i, self.envs[i // self.per_env]) for i in self._indices(indices)]

    def get_attr(self, name: str, indices: Indices = None) -> list[Any]:
        self._check_open()
        return [getattr(env.env, name) for _, env in self._env_of(indices)]

    def set_attr(self, name: str, value: Any, indices: Indices = None) -> None:
        self._check_open()
        for _, env in self._env_of(indices):
            setattr(env.env, name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None, **method_kwargs: Any) -> list[Any]:
        """Call a method of each row's env; ``get_state``/``set_state`` are the rows' (``AgentRows``): an env's
        first row holds the env's state, its other rows an empty dict."""
        self._check_open()
        out = []
        for i, env in self._env_of(indices):
            first = i % self.per_env == 0
            if method_name == "get_state":
                state = env.get_state()
                out.append(state if first or state is None else {})
            elif method_name == "set_state":
                out.append(env.set_state(*method_args) if first else None)
            else:
                out.append(getattr(env.env, method_name)(*method_args, **method_kwargs))
        return out

    def env_is_wrapped(self, wrapper_class: type, indices: Indices = None) -> list[bool]:
        """True for the Monitor (every row's episodes end with ``info["episode"]``), else False."""
        self._check_open()
        monitored = wrapper_class.__name__ == "Monitor"
        return [monitored for _ in self._indices(indices)]

    def get_images(self) -> list[np.ndarray]:
        self._check_open()
        return [np.asarray(env.env.render()) for env in self.envs]

    def close_extras(self) -> None:
        for env in self.envs:
            env.env.close()

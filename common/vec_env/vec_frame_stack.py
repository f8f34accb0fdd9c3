"""VecFrameStack: the last ``n_stack`` observations concatenated along the channel (last) axis."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from common.vec_env.base import VecEnv, VecEnvWrapper, VecObs, VecStepReturn


class VecFrameStack(VecEnvWrapper):
    """Stacks frames of a Box observation; a finished env starts its stack from zeros.

    Args:
        venv: vec env with a Box observation space.
        n_stack: number of frames stacked.
    """

    def __init__(self, venv: VecEnv, n_stack: int) -> None:
        space = venv.observation_space
        if not isinstance(space, spaces.Box):
            raise TypeError(f"VecFrameStack needs a Box observation space, got {space}")
        if n_stack < 1:
            raise ValueError(f"n_stack must be >= 1, got {n_stack}")
        self.n_stack = int(n_stack)
        low = np.repeat(space.low, n_stack, axis=-1)
        high = np.repeat(space.high, n_stack, axis=-1)
        self._channels = space.shape[-1]
        super().__init__(venv, observation_space=spaces.Box(low=low, high=high, dtype=space.dtype))
        self.stacked = np.zeros((self.num_envs, *self.observation_space.shape), dtype=space.dtype)

    def _push(self, obs: np.ndarray) -> None:
        c = self._channels
        self.stacked = np.roll(self.stacked, shift=-c, axis=-1)
        self.stacked[..., -c:] = obs

    def step_wait(self) -> VecStepReturn:
        obs, rews, dones, infos = self.venv.step_wait()
        c = self._channels
        for i in np.flatnonzero(dones):
            if "terminal_observation" in infos[i]:
                terminal = np.concatenate([self.stacked[i, ..., c:], infos[i]["terminal_observation"]], axis=-1)
                infos[i]["terminal_observation"] = terminal
            self.stacked[i] = 0
        self._push(obs)
        return self.stacked.copy(), rews, dones, infos

    def reset(self) -> VecObs:
        obs = self.venv.reset()
        self.stacked[...] = 0
        self._push(obs)
        return self.stacked.copy()

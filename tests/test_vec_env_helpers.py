"""Envs that misbehave on purpose, importable by worker processes (helpers of the vec-env tests; no tests here)."""

import os
import time

import gymnasium as gym
import numpy as np


class FailingEnv(gym.Env):
    """Raises in the constructor, ``reset`` or on step number ``fail_step``, as configured."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, where: str = "", fail_step: int = 3):
        if where == "init":
            raise RuntimeError("constructor exploded")
        self.where, self.fail_step, self.t = where, fail_step, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.where == "reset":
            raise RuntimeError("reset exploded")
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.where == "step" and self.t >= self.fail_step:
            raise RuntimeError(f"step exploded at t={self.t}")
        if self.where == "exit" and self.t >= self.fail_step:
            os._exit(3)
        return np.full(2, self.t / 100, np.float32), 1.0, False, False, {}


class SleepyEnv(FailingEnv):
    """Sleeps in step (to test that a slow env is waited for, not declared dead)."""

    def step(self, action):
        time.sleep(0.05)
        return super().step(action)


class TupleEnv(gym.Env):
    """Tuple observation and Tuple action (actions cannot go through shared memory)."""

    observation_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,), np.float32)))
    action_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(2)))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        obs = (int(self.np_random.integers(3)), self.np_random.uniform(-1, 1, 2).astype(np.float32))
        return obs, {"start": int(self.np_random.integers(100))}

    def step(self, action):
        self.t += 1
        obs = (int(self.np_random.integers(3)), self.np_random.uniform(-1, 1, 2).astype(np.float32))
        reward = float(action[0] == self.t % 3) + action[1]
        return obs, reward, self.t >= 7, False, {"t": self.t} if self.t % 2 else {}

    def getenv(self, name):
        return os.environ.get(name)

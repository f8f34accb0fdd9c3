"""A gymnasium wrapper for diagnosing HalfCheetah evaluations: at each episode end it prints the return and
the range of the torso's pitch (``qpos[2]``, radians) and how many steps it spent past pi/2 (upside down).

    PYTHONPATH=bench python -m run --load_path=model.zip --num_timesteps=0 --play --no_render \\
        --play_episodes=10 --seed=1000 --wrapper=pitch_watch:PitchWatch

With the same ``--seed`` the episodes are those of the standalone evaluation (``--eval_episodes=10``).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class PitchWatch(gym.Wrapper):
    """Prints ``PITCH return R min A max B upside-down steps N`` when an episode ends."""

    def reset(self, **kwargs: Any) -> Any:
        self.episode_return, self.pitches = 0.0, []
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.episode_return += float(reward)
        self.pitches.append(float(self.env.unwrapped.data.qpos[2]))
        if terminated or truncated:
            p = np.asarray(self.pitches)
            print(f"PITCH return {self.episode_return:.1f} min {p.min():.2f} max {p.max():.2f} "
                  f"upside-down steps {int((np.abs(p) > np.pi / 2).sum())}", flush=True)
        return obs, reward, terminated, truncated, info

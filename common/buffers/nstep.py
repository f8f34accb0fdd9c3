"""n-step transitions for replay: per-env queues of the last ``n`` steps in front of a replay buffer.

A stored row starts at step ``t`` and holds ``R = r_t + g r_{t+1} + ... + g^(m-1) r_{t+m-1}``, the observation
``m`` steps later, whether the episode terminated within those ``m`` steps, and ``discounts = g^m``: the
learner's target is ``R + discounts * (1 - done) * Q(next_obs)``. ``m`` is ``n``, or fewer where the episode
ended inside the ``n`` steps: on termination the rows of every queued step are stored with ``done = 1`` (no
bootstrap); on truncation (a time limit) with ``done = 0`` and the final observation, so they bootstrap from it
with the discount of the steps they really took. Works for ``ReplayBuffer`` and ``PrioritizedReplayBuffer``
(any buffer whose ``add`` takes a ``discounts`` extra).
"""
from __future__ import annotations

from typing import Any

import numpy as np


class NStepQueues:
    """Turns one-step transitions of ``num_envs`` envs into ``n``-step rows and adds them to ``buffer``.

    Each env's queue is a fixed block of ``n`` rows (observations, actions, rewards) and a length, so that a
    checkpoint holds arrays of one shape whatever is queued.

    Args:
        buffer: a replay buffer built with the extra ``discounts = ((), np.float32)``.
        n: steps per return (>= 1).
        gamma: discount factor.
        num_envs: envs of the VecEnv (one queue each).
    """

    def __init__(self, buffer: Any, n: int, gamma: float, num_envs: int) -> None:
        if n < 1:
            raise ValueError(f"n-step returns need n >= 1, got {n}")
        self.buffer, self.n, self.gamma = buffer, int(n), float(gamma)
        envs = int(num_envs)
        self.obs = np.zeros((envs, self.n, *buffer.obs.shape[1:]), buffer.obs.dtype)
        self.actions = np.zeros((envs, self.n, *buffer.actions.shape[1:]), buffer.actions.dtype)
        self.rewards = np.zeros((envs, self.n), np.float64)
        self.lengths = np.zeros(envs, np.int64)

    def add(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray, next_obs: np.ndarray,
            terminated: np.ndarray, ended: np.ndarray, **next_extras: np.ndarray) -> int:
        """Queue one VecEnv step and store the rows it completes; returns how many were stored.

        ``next_obs`` and ``terminated`` as ``terminal_aware_next`` gives them (the final observation where an
        episode ended; 1.0 only for a real termination), ``ended`` True where an episode ended for any reason,
        ``next_extras`` rows that belong to the next observation (deepq's ``next_masks``).
        """
        env_of, row_obs, row_actions, returns, discounts, dones = [], [], [], [], [], []
        for i in range(len(self.lengths)):
            k = int(self.lengths[i])
            self.obs[i, k], self.actions[i, k], self.rewards[i, k] = obs[i], actions[i], rewards[i]
            k += 1
            starts = range(k) if ended[i] else [0] if k == self.n else []
            for j in starts:  # a row per queued step on an episode's end, else the oldest of a full queue
                ret = 0.0
                for r in self.rewards[i, j:k][::-1]:
                    ret = r + self.gamma * ret
                env_of.append(i)
                row_obs.append(self.obs[i, j].copy())
                row_actions.append(self.actions[i, j].copy())
                returns.append(ret)
                discounts.append(self.gamma ** (k - j))
                dones.append(float(terminated[i]) if ended[i] else 0.0)
            if ended[i]:
                k = 0
            elif k == self.n:  # drop the oldest step
                self.obs[i, :-1], self.actions[i, :-1], self.rewards[i, :-1] = (
                    self.obs[i, 1:].copy(), self.actions[i, 1:].copy(), self.rewards[i, 1:].copy())
                k -= 1
            self.lengths[i] = k
        if not env_of:
            return 0
        env = np.array(env_of)
        self.buffer.add(np.stack(row_obs), np.stack(row_actions), np.array(returns, np.float32), next_obs[env],
                        np.array(dones, np.float32), discounts=np.array(discounts, np.float32),
                        **{k: np.asarray(v)[env] for k, v in next_extras.items()})
        return len(env_of)

    def restart(self) -> None:
        """Drop every queued step (the envs started new episodes without finishing theirs)."""
        self.lengths[:] = 0

    def state(self) -> dict[str, Any]:
        """The queues, for checkpoints: the live blocks and their lengths."""
        return {"obs": self.obs, "actions": self.actions, "rewards": self.rewards, "lengths": self.lengths}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state`` returned."""
        for name in ("obs", "actions", "rewards", "lengths"):
            target, value = getattr(self, name), np.asarray(state[name])
            if value is not target:
                target[...] = value
        if not ((self.lengths >= 0) & (self.lengths < self.n)).all():
            raise ValueError(f"n-step queue lengths {self.lengths.tolist()} outside [0, {self.n})")

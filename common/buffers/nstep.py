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
        self.queues: list[list[tuple[np.ndarray, np.ndarray, float]]] = [[] for _ in range(int(num_envs))]

    def add(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray, next_obs: np.ndarray,
            terminated: np.ndarray, ended: np.ndarray, **next_extras: np.ndarray) -> int:
        """Queue one VecEnv step and store the rows it completes; returns how many were stored.

        ``next_obs`` and ``terminated`` as ``terminal_aware_next`` gives them (the final observation where an
        episode ended; 1.0 only for a real termination), ``ended`` True where an episode ended for any reason,
        ``next_extras`` rows that belong to the next observation (deepq's ``next_masks``).
        """
        rows: list[tuple[int, np.ndarray, np.ndarray, float, float]] = []  # (env, obs, action, R, g^m)
        done_of: list[float] = []
        for i, queue in enumerate(self.queues):
            queue.append((obs[i], actions[i], float(rewards[i])))
            if ended[i]:
                for j in range(len(queue)):
                    rows.append((i, *self._row(queue[j:])))
                    done_of.append(float(terminated[i]))
                queue.clear()
            elif len(queue) == self.n:
                rows.append((i, *self._row(queue)))
                done_of.append(0.0)
                queue.pop(0)
        if not rows:
            return 0
        env = np.array([r[0] for r in rows])
        self.buffer.add(np.stack([r[1] for r in rows]), np.stack([r[2] for r in rows]),
                        np.array([r[3] for r in rows], np.float32), next_obs[env], np.array(done_of, np.float32),
                        discounts=np.array([r[4] for r in rows], np.float32),
                        **{k: np.asarray(v)[env] for k, v in next_extras.items()})
        return len(rows)

    def _row(self, steps: list[tuple[np.ndarray, np.ndarray, float]]) -> tuple[np.ndarray, np.ndarray, float, float]:
        """(obs, action, discounted return, g^m) of the row starting at ``steps[0]``, over all of ``steps``."""
        ret = 0.0
        for _, _, r in reversed(steps):
            ret = r + self.gamma * ret
        return steps[0][0], steps[0][1], ret, self.gamma ** len(steps)

    def restart(self) -> None:
        """Drop every queued step (the envs started new episodes without finishing theirs)."""
        for queue in self.queues:
            queue.clear()

    def state(self) -> dict[str, Any]:
        """The queued steps of each env, for checkpoints."""
        return {"queues": [{"obs": [s[0] for s in q], "actions": [s[1] for s in q], "rewards": [s[2] for s in q]}
                           for q in self.queues]}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state`` returned."""
        queues = state["queues"]
        if len(queues) != len(self.queues):
            raise ValueError(f"n-step queues of {len(queues)} envs, this run has {len(self.queues)}")
        self.queues = [[(np.asarray(o), np.asarray(a), float(r)) for o, a, r in zip(q["obs"], q["actions"], q["rewards"])]
                       for q in queues]

"""Rollout storage and generalised advantage estimation (GAE), in numpy over (nsteps, nenvs) arrays."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    dones: np.ndarray,
    last_values: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns (= advantages + values).

    Args:
        rewards, values, dones: arrays [nsteps, nenvs]; ``dones[t]`` is True when the episode ended
            (terminated or truncated) after the action at step t. Truncation bootstrapping is done
            beforehand by adding ``gamma * V(terminal_observation)`` to the reward
            (see ``bootstrap_truncated``).
        last_values: [nenvs] values of the observations after the last step.
    """
    nsteps = len(rewards)
    advs = np.zeros_like(values, dtype=np.float32)
    notdone = 1.0 - np.asarray(dones, np.float32)
    lastgaelam = np.zeros_like(last_values, dtype=np.float32)
    next_values = last_values
    for t in range(nsteps - 1, -1, -1):
        delta = rewards[t] + gamma * next_values * notdone[t] - values[t]
        lastgaelam = delta + gamma * lam * notdone[t] * lastgaelam
        advs[t] = lastgaelam
        next_values = values[t]
    return advs, (advs + values).astype(np.float32)


def bootstrap_truncated(
    rewards: np.ndarray,
    dones: np.ndarray,
    infos: Sequence[dict],
    value_fn: Callable[[list, np.ndarray], np.ndarray],
    gamma: float,
) -> np.ndarray:
    """Add ``gamma * V(terminal_observation)`` to the rewards of envs cut by a time limit (in place).

    ``value_fn(terminal_observations, env_indices)`` evaluates the values in one batch. Envs that
    really terminated are left alone. Returns the indices that were bootstrapped.
    """
    idx = [i for i in np.flatnonzero(dones) if infos[i].get("TimeLimit.truncated", False)
           and "terminal_observation" in infos[i]]
    if idx:
        idx_arr = np.asarray(idx)
        rewards[idx_arr] += gamma * np.asarray(value_fn([infos[i]["terminal_observation"] for i in idx], idx_arr))
        return idx_arr
    return np.zeros(0, np.int64)


class RolloutStorage:
    """Arrays [nsteps, nenvs, ...] for one on-policy rollout, plus GAE.

    ``episode_starts[t]`` is True when obs[t] is the first observation of an episode (for recurrent
    state resets); ``states0`` is the recurrent state before step 0; ``masks[t]`` the action masks of obs[t]
    (only when the env gives masks: ``mask_size`` > 0).
    """

    def __init__(self, nsteps: int, nenvs: int, obs_shape, obs_dtype, action_shape, action_dtype, state_size: int = 0,
                 mask_size: int = 0):
        self.nsteps, self.nenvs = int(nsteps), int(nenvs)
        self.obs = np.zeros((nsteps, nenvs) + tuple(obs_shape), obs_dtype)
        self.actions = np.zeros((nsteps, nenvs) + tuple(action_shape), action_dtype)
        self.rewards = np.zeros((nsteps, nenvs), np.float32)
        self.dones = np.zeros((nsteps, nenvs), bool)
        self.values = np.zeros((nsteps, nenvs), np.float32)
        self.neglogps = np.zeros((nsteps, nenvs), np.float32)
        self.episode_starts = np.zeros((nsteps, nenvs), np.float32)
        self.states0 = np.zeros((nenvs, state_size), np.float32) if state_size else None
        self.masks = np.zeros((nsteps, nenvs, mask_size), bool) if mask_size else None
        self.advantages = self.returns = None

    def compute_returns(self, last_values: np.ndarray, gamma: float, lam: float) -> None:
        """Fill ``advantages`` and ``returns`` with GAE."""
        self.advantages, self.returns = compute_gae(self.rewards, self.values, self.dones, last_values, gamma, lam)

    def flat(self, name: str) -> np.ndarray | None:
        """Array ``name`` with the (nsteps, nenvs) axes merged (no copy); None for an absent one (``masks``)."""
        arr = getattr(self, name)
        if arr is None:
            return None
        return arr.reshape((self.nsteps * self.nenvs,) + arr.shape[2:])

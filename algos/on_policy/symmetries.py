"""Symmetry augmentation of on-policy updates: an env whose positions have symmetries (a board game's rotations
and reflections) lists them with a ``symmetries()`` method, and each update trains on every rollout sample in
each symmetric form as well, so a position learnt in one orientation is learnt in all of them.

``symmetries()`` returns (observation index, action map) pairs of integer arrays, the identity left out: the
transformed observation is ``obs.reshape(-1)[observation_index]`` (reshaped back) and the transformed action
``action_map[action]`` (a permutation of the Discrete actions). ``envs/tictactoe.py`` lists the seven of a 3x3
board. The transformed samples keep the original's return, value and advantage (a symmetric position is worth
the same) and its log-probability: a copied move was drawn with its original's probability, so that is the
denominator of PPO's importance ratio (and ``approxkl`` / ``clipfrac`` also measure how far the policy is from
treating symmetric positions alike).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np

from common.errors import ConfigError
from common.vec_env import EnvWorkerError


@dataclasses.dataclass(frozen=True)
class Symmetry:
    """One symmetry: where each transformed observation entry comes from, and where each action goes."""

    observation_index: np.ndarray
    action_map: np.ndarray

    @property
    def mask_index(self) -> np.ndarray:
        """Where each transformed action-mask entry comes from (the inverse of ``action_map``)."""
        return np.argsort(self.action_map)


def env_symmetries(env: Any) -> list[Symmetry]:
    """The symmetries the env's ``symmetries()`` lists (checked); ConfigError when it lists none or they do not
    fit its spaces."""
    try:
        pairs = env.env_method("symmetries", indices=[0])[0]
    except (AttributeError, EnvWorkerError):
        pairs = None
    if not pairs:
        raise ConfigError("augment_symmetries: the env lists no symmetries (it needs a symmetries() method, or a "
                          "game with one, such as TicTacToe-v0)")
    if not isinstance(env.action_space, gym.spaces.Discrete) or not isinstance(env.observation_space, gym.spaces.Box):
        raise ConfigError(f"augment_symmetries needs a Box observation and a Discrete action space, got "
                          f"{env.observation_space} and {env.action_space}")
    size, moves = int(np.prod(env.observation_space.shape)), int(env.action_space.n)
    out = []
    for observation_index, action_map in pairs:
        s = Symmetry(np.asarray(observation_index, np.intp), np.asarray(action_map, np.intp))
        if sorted(s.observation_index.tolist()) != list(range(size)) or sorted(s.action_map.tolist()) != list(range(moves)):
            raise ConfigError(f"augment_symmetries: each symmetry must permute the {size} observation entries and "
                              f"the {moves} actions")
        out.append(s)
    return out


def augment(symmetries: list[Symmetry], obs: np.ndarray, actions: np.ndarray,
            masks: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The transformed copies of a flat batch (observations, actions, action masks or None), one block per
    symmetry, without the original."""
    flat = obs.reshape(len(obs), -1)
    obs_out = np.concatenate([flat[:, s.observation_index] for s in symmetries]).reshape((-1, *obs.shape[1:]))
    actions_out = np.concatenate([s.action_map[actions] for s in symmetries]).astype(actions.dtype)
    masks_out = None if masks is None else np.concatenate([masks[:, s.mask_index] for s in symmetries])
    return obs_out, actions_out, masks_out

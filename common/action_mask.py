"""Invalid-action masks: where they come from and how a learner reads them.

An env offers a mask of the actions that are legal in its current observation in one of three ways:

- ``info["action_mask"]`` from ``reset`` and ``step`` (the mask of the observation returned with it);
- an ``action_masks()`` method (as sb3-contrib's MaskablePPO expects);
- a Dict observation with the key ``"action_mask"`` (as PettingZoo's classic games have).

``ActionMaskInfo``, applied by ``common.env_factory.make_env`` (so inside the vec env's worker processes,
with no extra round trip per step), turns the last two into the first: the mask travels in the step's info
and the reset info, and a Dict key is removed from the observation the policy sees. ``VecActionMasks``
reads the masks of a vec env after each step (the reset info of an env that was reset in that step).

A mask is a bool vector over the actions: ``n`` entries for ``Discrete(n)``, the per-dimension masks
concatenated (``sum(nvec)`` entries) for ``MultiDiscrete(nvec)``. Masked logits are replaced by
``MASKED_LOGIT``, finite so that ``0 * logit`` stays 0 in entropies and gradients (``-inf`` gives NaN).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from common.errors import UserError

MASK_KEY = "action_mask"
MASKED_LOGIT = -1e9


class ActionMaskError(UserError, ValueError):
    """An env's action mask does not fit its action space, or leaves no legal action."""


def mask_size(action_space: spaces.Space) -> int | None:
    """Entries of a mask for ``action_space`` (Discrete: n, MultiDiscrete: sum(nvec)); None when masks do not apply."""
    if isinstance(action_space, spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, spaces.MultiDiscrete):
        return int(np.sum(action_space.nvec))
    return None


def provides_masks(env: gym.Env) -> bool:
    """Whether ``env`` has an ``action_masks()`` method or a Dict observation with an ``action_mask`` key."""
    space = env.observation_space
    if isinstance(space, spaces.Dict) and MASK_KEY in space.spaces:
        return True
    try:
        return callable(env.get_wrapper_attr("action_masks"))
    except AttributeError:
        return False


class ActionMaskInfo(gym.Wrapper):
    """Puts the mask of each new observation into ``info["action_mask"]``: from the observation's
    ``action_mask`` key (removed from the observation and its space) or from ``env.action_masks()``."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        self._from_key = isinstance(space, spaces.Dict) and MASK_KEY in space.spaces
        if self._from_key:
            rest = {k: v for k, v in space.spaces.items() if k != MASK_KEY}
            if not rest:
                raise ActionMaskError("the observation space has only the 'action_mask' key; the policy needs "
                                      "an observation besides the mask")
            only = next(iter(rest.values())) if len(rest) == 1 and "observation" in rest else None
            self.observation_space = only if only is not None else spaces.Dict(rest)
            self._only_key = "observation" if only is not None else None

    def _split(self, obs: Any, info: dict) -> Any:
        if self._from_key:
            info[MASK_KEY] = np.asarray(obs[MASK_KEY], dtype=bool)
            if self._only_key is not None:
                return obs[self._only_key]
            return {k: v for k, v in obs.items() if k != MASK_KEY}
        info[MASK_KEY] = np.asarray(self.env.get_wrapper_attr("action_masks")(), dtype=bool)
        return obs

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        info = dict(info)
        return self._split(obs, info), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = dict(info)
        return self._split(obs, info), reward, terminated, truncated, info


def wrap_action_masks(env: gym.Env) -> gym.Env:
    """``env`` in an ``ActionMaskInfo`` when it provides masks through ``action_masks()`` or a Dict key, else ``env``."""
    return ActionMaskInfo(env) if provides_masks(env) else env


def check_masks(masks: np.ndarray, action_space: spaces.Space) -> None:
    """ActionMaskError unless ``masks`` [envs, mask_size] fits ``action_space`` and leaves a legal action
    in every env (in every dimension of a MultiDiscrete space)."""
    size = mask_size(action_space)
    if masks.ndim != 2 or masks.shape[1] != size:
        raise ActionMaskError(f"action mask of shape {masks.shape[1:]} does not fit the action space {action_space}: "
                              f"it needs {size} entries per env")
    if isinstance(action_space, spaces.MultiDiscrete):
        starts = np.concatenate([[0], np.cumsum(action_space.nvec.ravel())[:-1]])
        legal = np.logical_or.reduceat(masks, starts, axis=1).all(axis=1)
    else:
        legal = masks.any(axis=1)
    if not legal.all():
        raise ActionMaskError(f"the action mask of env {int(np.flatnonzero(~legal)[0])} masks every action"
                              f"{' of a dimension' if isinstance(action_space, spaces.MultiDiscrete) else ''}; "
                              "an env must leave at least one legal action")


def _stack(masks: Sequence[Any], action_space: spaces.Space) -> np.ndarray:
    try:
        out = np.array(masks, dtype=bool)
    except ValueError:
        raise ActionMaskError(f"action masks of different shapes {[np.shape(m) for m in masks]} for the action "
                              f"space {action_space}") from None
    return out.reshape(len(masks), -1) if out.ndim > 2 else out


class VecActionMasks:
    """The masks of a vec env's current observations, kept up to date step by step.

    ``current`` is a bool array [num_envs, mask_size] for the observations the learner acts on next;
    ``next_of_step`` the masks of the observations each step returned before any reset (the terminal
    observation's mask where an episode ended: what a replay buffer stores as the next-state mask).
    """

    def __init__(self, env: Any, action_space: spaces.Space) -> None:
        self.env, self.action_space = env, action_space
        self.current = self._read(list(env.reset_infos))
        self.next_of_step = self.current

    @classmethod
    def of(cls, env: Any) -> VecActionMasks | None:
        """The masks of ``env`` (just reset) when its reset infos carry them, else None (no masking)."""
        infos = getattr(env, "reset_infos", None)
        if not infos or MASK_KEY not in infos[0]:
            return None
        if mask_size(env.action_space) is None:
            raise ActionMaskError(f"the env gives action masks, but masks need a Discrete or MultiDiscrete "
                                  f"action space, not {env.action_space}")
        return cls(env, env.action_space)

    def _read(self, infos: Sequence[dict]) -> np.ndarray:
        try:
            masks = _stack([info[MASK_KEY] for info in infos], self.action_space)
        except KeyError:
            missing = next(i for i, info in enumerate(infos) if MASK_KEY not in info)
            raise ActionMaskError(f"env {missing} gave no 'action_mask' in its info although it gave one "
                                  "before; give it with every reset and step") from None
        check_masks(masks, self.action_space)
        return masks

    def update(self, infos: Sequence[dict], dones: np.ndarray) -> np.ndarray:
        """Read the masks after a step (``infos``, ``dones`` as the vec env returned them); returns ``current``."""
        if dones.any():
            # a final observation may have no legal action (a finished game): no mask there, so that a
            # target bootstrapped from it (time limits) stays an ordinary max
            size = self.current.shape[1]
            final = [np.asarray(info.get(MASK_KEY, True), bool) for info in infos]
            self.next_of_step = _stack([m if m.size == size and m.any() else np.ones(size, bool) for m in final],
                                       self.action_space)
            reset_infos = self.env.reset_infos
            self.current = self._read([reset_infos[i] if done else info
                                       for i, (done, info) in enumerate(zip(dones, infos))])
        else:
            self.current = self.next_of_step = self._read(infos)
        return self.current


def masked_logits(params: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Logits with the masked entries (False in ``masks``) set to ``MASKED_LOGIT`` (numpy)."""
    return np.where(masks, params, np.float32(MASKED_LOGIT)).astype(params.dtype, copy=False)

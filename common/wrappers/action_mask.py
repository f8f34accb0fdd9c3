"""Invalid-action masks: where they come from and how a learner reads them.

An env offers a mask of the actions that are legal in its current observation in one of three ways:

- ``info["action_mask"]`` from ``reset`` and ``step`` (the mask of the observation returned with it);
- an ``action_masks()`` method (as sb3-contrib's MaskablePPO expects);
- a Dict observation with the key ``"action_mask"`` (as PettingZoo's classic games have).

``ActionMaskInfo``, applied by ``runner.env_factory.make_env`` (so inside the vec env's worker processes,
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
        else:  # looked up once: get_wrapper_attr walks the wrapper chain
            self._action_masks = env.get_wrapper_attr("action_masks")

    def _split(self, obs: Any, info: dict) -> Any:
        if self._from_key:
            info[MASK_KEY] = np.asarray(obs[MASK_KEY], dtype=bool)
            if self._only_key is not None:
                return obs[self._only_key]
            return {k: v for k, v in obs.items() if k != MASK_KEY}
        info[MASK_KEY] = np.asarray(self._action_masks(), dtype=bool)
        return obs

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        return self._split(obs, info), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._split(obs, info), reward, terminated, truncated, info


def wrap_action_masks(env: gym.Env) -> gym.Env:
    """``env`` in an ``ActionMaskInfo`` when it provides masks through ``action_masks()`` or a Dict key, else ``env``."""
    return ActionMaskInfo(env) if provides_masks(env) else env


class MaskLayout:
    """The mask layout of an action space (``size`` entries; for MultiDiscrete the first entry of each
    dimension in ``starts``) and the per-step check of a batch of masks."""

    def __init__(self, action_space: spaces.Space) -> None:
        size = mask_size(action_space)
        if size is None:
            raise ActionMaskError(f"the env gives action masks, but masks need a Discrete or MultiDiscrete "
                                  f"action space, not {action_space}")
        self.action_space, self.size = action_space, size
        multi = isinstance(action_space, spaces.MultiDiscrete)
        self.starts = np.concatenate([[0], np.cumsum(action_space.nvec.ravel())[:-1]]) if multi else None

    def stack(self, masks: Sequence[Any]) -> np.ndarray:
        """One env's mask per item -> bool [envs, size]; ActionMaskError when they do not fit or leave some
        env (or a dimension of it) without a legal action."""
        try:
            out = np.array(masks, dtype=bool)
        except ValueError:
            out = None
        if out is None or out.shape != (len(masks), self.size):
            shapes = sorted({np.shape(m) for m in masks})
            raise ActionMaskError(f"action mask of shape {shapes[0] if len(shapes) == 1 else shapes} does not fit the "
                                  f"action space {self.action_space}: it needs {self.size} entries per env")
        legal = out.any(axis=1) if self.starts is None else np.logical_or.reduceat(out, self.starts, axis=1).all(axis=1)
        if not legal.all():
            raise ActionMaskError(f"the action mask of env {int(np.flatnonzero(~legal)[0])} masks every action"
                                  f"{'' if self.starts is None else ' of a dimension'}; an env must leave at least "
                                  "one legal action")
        return out


def check_masks(masks: np.ndarray, action_space: spaces.Space) -> None:
    """ActionMaskError unless ``masks`` [envs, mask_size] fits ``action_space`` and leaves a legal action
    in every env (in every dimension of a MultiDiscrete space)."""
    MaskLayout(action_space).stack(list(masks))


class VecActionMasks:
    """The masks of a vec env's current observations, kept up to date step by step.

    ``current`` is a bool array [num_envs, mask_size] for the observations the learner acts on next;
    ``next_of_step`` the masks of the observations each step returned before any reset (the terminal
    observation's mask where an episode ended: what a replay buffer stores as the next-state mask).
    """

    def __init__(self, env: Any, action_space: spaces.Space) -> None:
        self.env, self.layout = env, MaskLayout(action_space)
        self.restart()

    @classmethod
    def of(cls, env: Any) -> VecActionMasks | None:
        """The masks of ``env`` (just reset) when its reset infos carry them, else None (no masking)."""
        infos = getattr(env, "reset_infos", None)
        if not infos or MASK_KEY not in infos[0]:
            return None
        return cls(env, env.action_space)

    def _read(self, infos: Sequence[dict]) -> np.ndarray:
        try:
            masks = [info[MASK_KEY] for info in infos]
        except KeyError:
            missing = next(i for i, info in enumerate(infos) if MASK_KEY not in info)
            raise ActionMaskError(f"env {missing} gave no 'action_mask' in its info although it gave one "
                                  "before; give it with every reset and step") from None
        return self.layout.stack(masks)

    def restart(self) -> None:
        """The envs were reset: read the masks of their first observations."""
        self.current = self.next_of_step = self._read(list(self.env.reset_infos))

    def state(self) -> dict:
        """The current masks, for training-state checkpoints."""
        return {"current": self.current, "next_of_step": self.next_of_step}

    def load_state(self, state: dict) -> None:
        """Restore what ``state`` returned."""
        self.current = np.array(state["current"], bool)
        self.next_of_step = np.array(state["next_of_step"], bool)

    def update(self, infos: Sequence[dict], dones: np.ndarray) -> np.ndarray:
        """Read the masks after a step (``infos``, ``dones`` as the vec env returned them); returns ``current``."""
        if dones.any():
            # a final observation may have no legal action (a finished game): no mask there, so that a
            # target bootstrapped from it (time limits) stays an ordinary max
            size = self.layout.size
            final = [np.asarray(info.get(MASK_KEY, True), bool) for info in infos]
            self.next_of_step = np.array([m if m.size == size and m.any() else np.ones(size, bool) for m in final])
            reset_infos = self.env.reset_infos
            self.current = self._read([reset_infos[i] if done else info
                                       for i, (done, info) in enumerate(zip(dones, infos))])
        else:
            self.current = self.next_of_step = self._read(infos)
        return self.current


def masked_logits(params: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Logits with the masked entries (False in ``masks``) set to ``MASKED_LOGIT`` (numpy)."""
    return np.where(masks, params, np.asarray(MASKED_LOGIT, params.dtype))


def random_masks(rng: np.random.Generator, rows: int, action_space: spaces.Space) -> np.ndarray:
    """``rows`` random masks for ``action_space``, each action legal with probability 1/2 and at least one
    legal action per dimension (for checks and tests)."""
    nvec = [int(action_space.n)] if isinstance(action_space, spaces.Discrete) else np.ravel(action_space.nvec).tolist()
    parts = []
    for n in nvec:
        m = rng.random((rows, n)) < 0.5
        m[np.arange(rows), rng.integers(0, n, rows)] = True
        parts.append(m)
    return np.concatenate(parts, axis=1)


PACKED_KEY = "_action_mask_bytes"


def pack_mask(info: dict) -> dict:
    """``info`` (changed in place) with a 1-D bool ``action_mask`` as bytes under ``PACKED_KEY``: what a
    SubprocVecEnv worker sends, since pickling a numpy array costs ~10x more than its bytes (16 vs 1.5 us
    for four envs' masks); ``unpack_mask`` restores it in the parent."""
    mask = info.get(MASK_KEY)
    if type(mask) is np.ndarray and mask.dtype == np.bool_ and mask.ndim == 1:
        info[PACKED_KEY] = mask.tobytes()
        del info[MASK_KEY]
    return info


def unpack_mask(info: dict) -> dict:
    """``info`` (changed in place) with the ``action_mask`` that ``pack_mask`` packed as a bool array again."""
    packed = info.pop(PACKED_KEY, None)
    if packed is not None:
        info[MASK_KEY] = np.frombuffer(packed, dtype=np.bool_)
    return info

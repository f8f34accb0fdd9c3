"""Exploration for ddpg's rollouts: per-env action noise and per-env parameter-space noise (numpy).

Each env has its own noise: action-noise rows and parameter perturbations are restarted for an env
when its episode ends, not when all of them do.
"""
from __future__ import annotations

import numpy as np

from common.errors import ConfigError
from common.noise import ActionNoise, AdaptiveParamNoiseSpec


class Explorer:
    """Noisy actions in [-1, 1] for a batch of envs.

    Args:
        model: the DDPGModel (its numpy actor is used).
        action_noise: added to the actor's output (None: none).
        param_noise: adaptive parameter noise (None: none); each env acts with its own perturbed actor.
        n_envs: number of envs.
        rng: numpy Generator for the parameter perturbations.
    """

    def __init__(self, model, action_noise: ActionNoise | None, param_noise: AdaptiveParamNoiseSpec | None,
                 n_envs: int, rng: np.random.Generator):
        self.model, self.action_noise, self.param_noise = model, action_noise, param_noise
        self.n_envs, self.rng = int(n_envs), rng
        self._eps: list[list[np.ndarray]] = []
        self._perturbed: list[list[np.ndarray] | None] = []
        if param_noise is not None:
            if not model.actor.numpy_mirror:
                raise ConfigError("ddpg: parameter noise needs an mlp network (an actor with a numpy mirror)")
            self._mask = model.actor.perturbable()
            self._eps = [self._draw() for _ in range(self.n_envs)]
            self._perturbed = [None] * self.n_envs

    def _draw(self) -> list[np.ndarray]:
        base = self.model._np_actor
        return [self.rng.standard_normal(p.shape).astype(np.float32) if m else np.zeros_like(p)
                for p, m in zip(base, self._mask)]

    def _perturb(self, eps: list[np.ndarray], stddev: float) -> list[np.ndarray]:
        return [p + np.float32(stddev) * e if m else p for p, e, m in zip(self.model._np_actor, eps, self._mask)]

    def actions(self, x: np.ndarray) -> np.ndarray:
        """Noisy actions in [-1, 1] for the encoded observations of every env."""
        if self.param_noise is None:
            unit = self.model.act_unit(x)
        else:
            rows = []
            for i in range(self.n_envs):
                if self._perturbed[i] is None:
                    self._perturbed[i] = self._perturb(self._eps[i], self.param_noise.current_stddev)
                rows.append(self.model.act_unit(x[i: i + 1], self._perturbed[i]))
            unit = np.concatenate(rows, axis=0)
        if self.action_noise is not None:
            unit = unit + self.action_noise.sample().reshape(unit.shape)
        return np.clip(unit, -1.0, 1.0).astype(np.float32)

    def reset(self, indices: np.ndarray) -> None:
        """Restart the noise of the envs ``indices`` (their episodes ended)."""
        if len(indices) == 0:
            return
        if self.action_noise is not None:
            self.action_noise.reset(indices)
        if self.param_noise is not None:
            for i in indices:
                self._eps[i] = self._draw()
                self._perturbed[i] = None

    def refresh(self) -> None:
        """The actor's weights (or the noise scale) changed: rebuild the perturbed copies lazily."""
        self._perturbed = [None] * len(self._perturbed)

    def adapt(self, x: np.ndarray) -> float | None:
        """Measure the action distance of a fresh perturbation on encoded observations ``x`` and adapt
        the parameter-noise scale toward the desired distance; returns the distance (None: no param noise)."""
        if self.param_noise is None:
            return None
        perturbed = self._perturb(self._draw(), self.param_noise.current_stddev)
        diff = self.model.act_unit(x) - self.model.act_unit(x, perturbed)
        distance = float(np.sqrt(np.mean(np.square(diff))))
        self.param_noise.adapt(distance)
        self.refresh()
        return distance

"""Exploration of the off-policy actor-critics (numpy, no TF call per env step).

``Explorer`` (ddpg, td3): per-env action noise and per-env parameter-space noise around the deterministic
actor; each env has its own noise, restarted for an env when its episode ends, not when all of them do.
``GaussianExplorer`` (sac, tqc): samples of the squashed-Gaussian policy.
``StateDependentExplorer`` (sac, tqc with ``use_sde``): the gSDE actor's state-dependent noise, a noise
matrix per env drawn at the start of each block of env steps and every ``sde_sample_freq`` steps in it.
An explorer offers ``actions(x)``, ``start_block()``, ``reset(indices)``, ``after_train(train_steps,
sample_obs)`` and ``acts_at_warmup`` (True: it acts before ``learning_starts`` too, instead of uniform
random actions).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from common.errors import ConfigError
from common.nn.sde import ExplorationMatrices
from common.noise import (
    ActionNoise,
    AdaptiveParamNoiseSpec,
    NoiseTypeError,
    parse_noise_type,
)

if TYPE_CHECKING:
    from algos.offpolicy.actor_critic import ActorCriticModel


class Explorer:
    """Noisy actions in [-1, 1] for a batch of envs.

    Args:
        model: an ActorCriticModel with a deterministic actor (its numpy actor is used).
        action_noise: added to the actor's output (None: none).
        param_noise: adaptive parameter noise (None: none); each env acts with its own perturbed actor.
        n_envs: number of envs.
        rng: numpy Generator for the parameter perturbations.
        adaption_interval: gradient steps between adaptions of the parameter-noise scale.
        random_action_share: probability that an env's action is replaced by a uniformly random one
            (drawn from ``rng``; baselines' her ``random_eps``).
    """

    acts_at_warmup = False

    def __init__(self, model, action_noise: ActionNoise | None, param_noise: AdaptiveParamNoiseSpec | None,
                 n_envs: int, rng: np.random.Generator, adaption_interval: int = 50,
                 random_action_share: float = 0.0):
        self.model, self.action_noise, self.param_noise = model, action_noise, param_noise
        self.random_action_share = float(random_action_share)
        self.n_envs, self.rng = int(n_envs), rng
        self.adaption_interval = self.next_adapt = int(adaption_interval)
        self._eps: list[list[np.ndarray]] = []
        self._perturbed: list[list[np.ndarray] | None] = []
        if param_noise is not None:
            if not model.actor.numpy_mirror:
                raise ConfigError(f"{model.algorithm}: parameter noise needs an mlp network (an actor with a numpy mirror) "
                                  "and no image keys in the observation; use e.g. --noise_type=normal_0.1")
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
        unit = np.clip(unit, -1.0, 1.0).astype(np.float32)
        if self.random_action_share > 0:
            random = self.rng.random(len(unit)) < self.random_action_share
            unit[random] = self.rng.uniform(-1.0, 1.0, (int(random.sum()), unit.shape[1]))
        return unit

    def start_block(self) -> None:
        """Nothing to do at the start of a block of env steps."""

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

    def state(self) -> dict:
        """Exploration state for checkpoints: generators, per-env perturbation directions, noise scale and
        processes, the next adaption."""
        return {"rng": self.rng.bit_generator.state, "eps": self._eps, "next_adapt": self.next_adapt,
                "stddev": None if self.param_noise is None else self.param_noise.current_stddev,
                "action_noise": None if self.action_noise is None else self.action_noise.state()}

    def load_state(self, state: dict) -> None:
        """Restore what ``state`` returned."""
        self.rng.bit_generator.state = state["rng"]
        self._eps = [list(e) for e in state["eps"]]
        self.next_adapt = int(state["next_adapt"])
        if self.param_noise is not None:
            self.param_noise.current_stddev = float(state["stddev"])
        if self.action_noise is not None:
            self.action_noise.load_state(state["action_noise"])
        self.refresh()

    def refresh(self) -> None:
        """The actor's weights (or the noise scale) changed: rebuild the perturbed copies lazily."""
        self._perturbed = [None] * len(self._perturbed)

    def after_train(self, train_steps: int, sample_obs: Callable[[], np.ndarray]) -> dict[str, float]:
        """After a training block: perturbed actors are rebuilt, and the parameter-noise scale adapted
        (on ``sample_obs()``) when ``adaption_interval`` gradient steps passed; returns what to log."""
        self.refresh()
        if self.param_noise is None or train_steps < self.next_adapt:
            return {}
        self.next_adapt = train_steps + self.adaption_interval
        distance = self.adapt(sample_obs())
        return {"param_noise_distance": distance, "param_noise_stddev": self.param_noise.current_stddev}

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


def noise_explorer(model: ActorCriticModel, noise_type: str | None, n_envs: int, noise_rng: np.random.Generator,
                   param_rng: np.random.Generator, adaption_interval: int,
                   parse: Callable[..., tuple[ActionNoise | None, AdaptiveParamNoiseSpec | None]] = parse_noise_type,
                   random_action_share: float = 0.0) -> Explorer:
    """An ``Explorer`` with the noise of a noise string ("normal_0.1", "ou_0.2,adaptive-param_0.2", ...;
    ``parse`` reads it) and ``random_action_share`` of uniformly random actions; ConfigError (one line) for a
    string it cannot read."""
    try:
        action_noise, param_noise = parse(noise_type, (model.act_dim,), n_envs, noise_rng)
    except NoiseTypeError as e:
        raise ConfigError(str(e)) from None
    return Explorer(model, action_noise, param_noise, n_envs, param_rng, adaption_interval, random_action_share)


class GaussianExplorer:
    """Actions sampled from a squashed-Gaussian policy (``model.sample_unit``), in [-1, 1]."""

    acts_at_warmup = False

    def __init__(self, model, rng: np.random.Generator):
        self.model, self.rng = model, rng

    def actions(self, x: np.ndarray) -> np.ndarray:
        """Sampled actions in [-1, 1] for the encoded observations of every env."""
        return self.model.sample_unit(x, self.rng)

    def start_block(self) -> None:
        """Nothing to do at the start of a block of env steps."""

    def reset(self, indices: np.ndarray) -> None:
        """Nothing to restart: the samples are independent."""

    def state(self) -> dict:
        """The sampling generator's state."""
        return {"rng": self.rng.bit_generator.state}

    def load_state(self, state: dict) -> None:
        """Restore what ``state`` returned."""
        self.rng.bit_generator.state = state["rng"]

    def after_train(self, train_steps: int, sample_obs: Callable[[], np.ndarray]) -> dict[str, float]:
        """Nothing to adapt."""
        return {}


class StateDependentExplorer:
    """gSDE actions ``tanh(mean(s) + z(s) @ theta_env)`` in [-1, 1] of a model with ``use_sde``
    (``model.mean_latent``, ``model.sde_std``); ``theta_env`` per env (``common.nn.sde.ExplorationMatrices``),
    drawn with ``rng`` at the start of every block of env steps and, with ``sample_freq`` k > 0, every k
    env steps of a block (stable-baselines3's off-policy ``sde_sample_freq``). ``at_warmup``: it acts before
    ``learning_starts`` too (stable-baselines3's ``use_sde_at_warmup``)."""

    def __init__(self, model, rng: np.random.Generator, n_envs: int, sample_freq: int, at_warmup: bool = False):
        self.model, self.rng = model, rng
        self.matrices = ExplorationMatrices(n_envs, model.latent_dim, model.act_dim, sample_freq)
        self.acts_at_warmup = bool(at_warmup)

    def start_block(self) -> None:
        """New noise matrices for every env."""
        self.matrices.reset(self.model.sde_std, self.rng)

    def actions(self, x: np.ndarray) -> np.ndarray:
        """Actions in [-1, 1] for the encoded observations of every env, each with its env's matrix."""
        mean, latent = self.model.mean_latent(x)
        noise = self.matrices.noise(latent, self.model.sde_std, self.rng)
        return np.tanh(mean + noise).astype(np.float32)

    def reset(self, indices: np.ndarray) -> None:
        """Nothing to restart when episodes end: the matrices change with blocks and steps only."""

    def state(self) -> dict:
        """The generator's state, the matrices and the steps since they were drawn."""
        return {"rng": self.rng.bit_generator.state, "sde": self.matrices.state()}

    def load_state(self, state: dict) -> None:
        """Restore what ``state`` returned."""
        self.rng.bit_generator.state = state["rng"]
        self.matrices.load_state(state["sde"])

    def after_train(self, train_steps: int, sample_obs: Callable[[], np.ndarray]) -> dict[str, float]:
        """Nothing to adapt."""
        return {}

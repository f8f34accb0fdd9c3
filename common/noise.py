"""Exploration noise for continuous actions (ddpg): action noise processes and adaptive parameter noise.

Every action-noise process keeps one independent state row per env (shape ``(n_envs, *action_shape)``),
so ``reset(indices)`` restarts only the envs whose episodes ended. Noise is drawn from a seeded numpy
``Generator``. ``parse_noise_type`` reads baselines' strings ("none", "normal_0.2", "ou_0.2",
"adaptive-param_0.2", or comma-separated combinations).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from common.errors import ConfigError

NOISE_KINDS = ("none", "normal_<stddev>", "ou_<stddev>", "adaptive-param_<stddev>")


class NoiseTypeError(ConfigError):
    """A noise specification cannot be understood."""


class ActionNoise:
    """Base class: ``sample()`` returns one noise row per env; ``reset(indices)`` restarts some envs."""

    def __init__(self, mu: np.ndarray, sigma: np.ndarray, n_envs: int, rng: np.random.Generator | None = None):
        self.mu = np.asarray(mu, np.float64)
        self.sigma = np.asarray(sigma, np.float64)
        if self.mu.shape != self.sigma.shape:
            raise ValueError(f"noise mu {self.mu.shape} and sigma {self.sigma.shape} must have the same shape")
        if n_envs < 1:
            raise ValueError(f"n_envs must be >= 1, got {n_envs}")
        self.n_envs = int(n_envs)
        self.rng = rng if rng is not None else np.random.default_rng()

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one sample: ``(n_envs, *action_shape)``."""
        return (self.n_envs, *self.mu.shape)

    def sample(self) -> np.ndarray:
        """Noise for every env, float32 array of shape ``(n_envs, *action_shape)``."""
        raise NotImplementedError

    def reset(self, indices: Sequence[int] | np.ndarray | None = None) -> None:
        """Restart the state of the envs ``indices`` (None: all)."""

    def state(self) -> dict:
        """The process's state for checkpoints: its generator's, and subclasses' own."""
        return {"rng": self.rng.bit_generator.state}

    def load_state(self, state: dict) -> None:
        """Restore what ``state`` returned."""
        self.rng.bit_generator.state = state["rng"]

    def __call__(self) -> np.ndarray:
        return self.sample()


class NormalActionNoise(ActionNoise):
    """Independent Gaussian noise ``N(mu, sigma)`` per step (stateless)."""

    def sample(self) -> np.ndarray:
        """Noise for every env."""
        return (self.mu + self.sigma * self.rng.standard_normal(self.shape)).astype(np.float32)

    def __repr__(self) -> str:
        return f"NormalActionNoise(mu={self.mu}, sigma={self.sigma}, n_envs={self.n_envs})"


class OrnsteinUhlenbeckActionNoise(ActionNoise):
    """Ornstein-Uhlenbeck process per env: ``x += theta (mu - x) dt + sigma sqrt(dt) N(0, 1)``.

    Args:
        mu, sigma: long-run mean and scale (arrays of the action shape).
        n_envs: number of independent processes.
        theta, dt: mean-reversion rate and time step (baselines: 0.15 and 1e-2).
        x0: initial state (default zeros).
        rng: numpy Generator.
    """

    def __init__(self, mu, sigma, n_envs: int = 1, theta: float = 0.15, dt: float = 1e-2,
                 x0: np.ndarray | None = None, rng: np.random.Generator | None = None):
        super().__init__(mu, sigma, n_envs, rng)
        self.theta, self.dt = float(theta), float(dt)
        self.x0 = None if x0 is None else np.asarray(x0, np.float64)
        self.x = np.zeros(self.shape, np.float64)
        self.reset()

    def sample(self) -> np.ndarray:
        """Advance every env's process one step and return the states."""
        self.x = (self.x + self.theta * (self.mu - self.x) * self.dt
                  + self.sigma * np.sqrt(self.dt) * self.rng.standard_normal(self.shape))
        return self.x.astype(np.float32)

    def reset(self, indices: Sequence[int] | np.ndarray | None = None) -> None:
        """Set the state of envs ``indices`` (None: all) back to ``x0`` (zeros by default)."""
        start = self.x0 if self.x0 is not None else np.zeros_like(self.mu)
        if indices is None:
            self.x[...] = start
        else:
            self.x[np.asarray(indices, dtype=np.int64)] = start

    def state(self) -> dict:
        """The generator's state and every env's process value."""
        return {**super().state(), "x": self.x}

    def load_state(self, state: dict) -> None:
        """Restore what ``state`` returned."""
        super().load_state(state)
        self.x[...] = state["x"]

    def __repr__(self) -> str:
        return f"OrnsteinUhlenbeckActionNoise(mu={self.mu}, sigma={self.sigma}, n_envs={self.n_envs})"


class SumActionNoise(ActionNoise):
    """The sum of several action noises ("normal_0.1,ou_0.2")."""

    def __init__(self, parts: Sequence[ActionNoise]):
        if not parts:
            raise ValueError("SumActionNoise needs at least one part")
        self.parts = list(parts)
        super().__init__(parts[0].mu, parts[0].sigma, parts[0].n_envs, parts[0].rng)

    def sample(self) -> np.ndarray:
        """Sum of the parts' samples."""
        return np.sum([p.sample() for p in self.parts], axis=0).astype(np.float32)

    def reset(self, indices: Sequence[int] | np.ndarray | None = None) -> None:
        """Reset every part."""
        for p in self.parts:
            p.reset(indices)

    def state(self) -> dict:
        """Every part's state."""
        return {"parts": [p.state() for p in self.parts]}

    def load_state(self, state: dict) -> None:
        """Restore what ``state`` returned."""
        for p, s in zip(self.parts, state["parts"], strict=True):
            p.load_state(s)


@dataclass
class AdaptiveParamNoiseSpec:
    """Adaptive parameter-space noise (Plappert et al. 2018), as baselines.

    The actor's weights are perturbed by ``N(0, current_stddev)``; every few steps the distance between
    the perturbed and the plain actor's actions is measured and ``adapt(distance)`` moves the stddev
    toward the one giving ``desired_action_stddev``: divided by ``adoption_coefficient`` when the
    distance is too large, multiplied by it otherwise.
    """

    initial_stddev: float = 0.1
    desired_action_stddev: float = 0.1
    adoption_coefficient: float = 1.01

    def __post_init__(self) -> None:
        if self.initial_stddev < 0 or self.desired_action_stddev < 0 or self.adoption_coefficient <= 1.0:
            raise ValueError("param noise needs stddevs >= 0 and adoption_coefficient > 1")
        self.current_stddev = float(self.initial_stddev)

    def adapt(self, distance: float) -> None:
        """Shrink the stddev when ``distance`` exceeds the desired one, grow it otherwise."""
        if distance > self.desired_action_stddev:
            self.current_stddev /= self.adoption_coefficient
        else:
            self.current_stddev *= self.adoption_coefficient

    def get_stats(self) -> dict[str, float]:
        """Current stddev (for logging)."""
        return {"param_noise_stddev": self.current_stddev}


def parse_noise_type(noise_type: str | None, action_shape: tuple[int, ...], n_envs: int = 1,
                     rng: np.random.Generator | None = None) -> tuple[ActionNoise | None, AdaptiveParamNoiseSpec | None]:
    """Read baselines' noise strings into ``(action_noise, param_noise)``.

    Args:
        noise_type: "none", "normal_S", "ou_S", "adaptive-param_S" or a comma-separated combination
            (action noises add up; S is the stddev, relative to the [-1, 1] action range).
        action_shape: shape of one action.
        n_envs: one independent noise process per env.
        rng: numpy Generator for the noise.

    Raises:
        NoiseTypeError: an unknown kind, a missing or negative stddev, or two parameter noises.
    """
    rng = rng if rng is not None else np.random.default_rng()
    text = "none" if noise_type is None else str(noise_type)
    action_parts: list[ActionNoise] = []
    param_noise = None
    zeros = np.zeros(action_shape)
    for raw in text.split(","):
        item = raw.strip()
        if item in ("none", ""):
            continue
        kind, sep, value = item.partition("_")
        if kind not in ("normal", "ou", "adaptive-param"):
            raise NoiseTypeError(f"unknown noise type {item!r} in noise_type={text!r}; use "
                                 f"{', '.join(NOISE_KINDS)} or a comma-separated combination")
        try:
            stddev = float(value) if sep else float("nan")
        except ValueError:
            stddev = float("nan")
        if not np.isfinite(stddev) or stddev < 0:
            raise NoiseTypeError(f"noise {item!r} needs a stddev >= 0 after '_', e.g. '{kind}_0.2'")
        if kind == "normal":
            action_parts.append(NormalActionNoise(zeros, np.full(action_shape, stddev), n_envs, rng))
        elif kind == "ou":
            action_parts.append(OrnsteinUhlenbeckActionNoise(zeros, np.full(action_shape, stddev), n_envs, rng=rng))
        else:
            if param_noise is not None:
                raise NoiseTypeError(f"noise_type={text!r} names parameter noise twice")
            param_noise = AdaptiveParamNoiseSpec(initial_stddev=stddev, desired_action_stddev=stddev)
    if not action_parts:
        action_noise = None
    elif len(action_parts) == 1:
        action_noise = action_parts[0]
    else:
        action_noise = SumActionNoise(action_parts)
    return action_noise, param_noise

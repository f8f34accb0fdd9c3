"""Adaptive parameter-space noise for deepq (Plappert et al. 2018, as baselines' ``build_act_with_param_noise``).

Acting stays in numpy. Each env acts greedily with its own perturbed copy of the online Q-network: Gaussian
noise ``sigma * e`` added to every weight and bias (never to layer-norm gains/offsets). An env's direction
``e`` is redrawn when its episode ends, so exploration stays consistent within an episode and the envs
explore independently (baselines has one env and redraws at every episode start; one shared perturbation
for all envs would redraw whenever any env finished, i.e. every few steps with many envs).

Unlike baselines, whose perturbed copy is a snapshot of the weights at the episode start, a copy here is
rebuilt as ``current weights + sigma * e`` (same ``e``) whenever the weights or sigma change, so acting
follows training inside long episodes (as ddpg's ``Explorer`` does).

Sigma adapts like baselines: ``adapt(obs, eps)`` draws a fresh perturbation, measures the mean KL
divergence between softmax(Q) of the plain and of that perturbed network on ``obs`` and multiplies sigma by
1.01 when the KL is below ``delta = -log(1 - eps + eps / n_actions)`` (the KL of an eps-greedy policy from
the greedy one), else divides it by 1.01 (at exact equality it grows; baselines shrinks; immaterial). The scale bookkeeping is ``common.noise.AdaptiveParamNoiseSpec``
with ``desired_action_stddev`` set to delta before each adaptation.

Sigma and the perturbations are exploration state: model files do not hold them.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from common.errors import ConfigError
from common.noise import AdaptiveParamNoiseSpec

# params trees are QFunction.numpy_params() tuples: (network list, advantage list, value list or None)
Tree = tuple


def kl_threshold(eps: float, n_actions: int) -> float:
    """baselines' KL target ``-log(1 - eps + eps / n_actions)``: KL(greedy || eps-greedy) for exploration rate ``eps``."""
    return float(-np.log(1.0 - eps + eps / float(n_actions)))


def _map(fn: Callable, *trees: Tree) -> Tree:
    """Apply ``fn`` leaf by leaf over params-shaped trees (None branches stay None)."""
    return tuple(None if parts[0] is None else [fn(*leaves) for leaves in zip(*parts)] for parts in zip(*trees))


def perturb(params: Tree, noise: Tree, sigma: float) -> Tree:
    """``params + sigma * noise`` leaf by leaf; leaves whose noise is None (layer-norm) are shared as they are."""
    s = np.float32(sigma)
    return _map(lambda p, e: p if e is None else p + s * e, params, noise)


def mean_kl(q: np.ndarray, q_other: np.ndarray) -> float:
    """Mean over the batch of KL(softmax(q) || softmax(q_other)), rows are states."""
    logp = q - q.max(axis=1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
    logr = q_other - q_other.max(axis=1, keepdims=True)
    logr = logr - np.log(np.exp(logr).sum(axis=1, keepdims=True))
    return float(np.mean(np.sum(np.exp(logp) * (logp - logr), axis=1)))


class ParamNoiseExplorer:
    """Greedy actions of per-env perturbed Q-networks, with baselines' adaptive noise scale.

    Args:
        model: the DQNModel (its Q-network must have a numpy mirror, i.e. an mlp network).
        n_envs: number of envs (one perturbation each).
        rng: numpy Generator for the perturbations.
        initial_sigma: starting noise scale (baselines: 0.01).
    """

    def __init__(self, model, n_envs: int, rng: np.random.Generator, initial_sigma: float = 0.01):
        if not model.q.has_numpy_mirror:
            raise ConfigError("deepq: param_noise needs a Q-network with a numpy mirror (an mlp with a named "
                              f"activation), got network={model.network!r}; use param_noise=False with it")
        self.model, self.n_envs, self.rng = model, int(n_envs), rng
        self.n_actions = int(model.q.num_actions)
        self.spec = AdaptiveParamNoiseSpec(initial_stddev=initial_sigma, desired_action_stddev=0.0)
        self._mask = model.q.perturbable()
        self._noise = [self._draw() for _ in range(self.n_envs)]
        self._perturbed: list[Tree | None] = [None] * self.n_envs
        self._base = None  # the params object the perturbed copies were built from
        self._sigma_built = self.sigma
        self.last_kl = float("nan")
        self.last_threshold = float("nan")

    @property
    def sigma(self) -> float:
        """Current noise scale."""
        return self.spec.current_stddev

    def _draw(self) -> Tree:
        params = self.model.numpy_params()
        return _map(lambda p, m: self.rng.standard_normal(p.shape, dtype=np.float32) if m else None,
                    params, self._mask)

    def perturbed_params(self, i: int) -> Tree:
        """The perturbed copy env ``i`` acts with (rebuilt when the weights or sigma changed)."""
        params = self.model.numpy_params()
        if params is not self._base or self.sigma != self._sigma_built:
            self._perturbed = [None] * self.n_envs
            self._base, self._sigma_built = params, self.sigma
        if self._perturbed[i] is None:
            self._perturbed[i] = perturb(params, self._noise[i], self.sigma)
        return self._perturbed[i]

    def actions(self, x: np.ndarray, masks: np.ndarray | None = None) -> np.ndarray:
        """Greedy actions (0-based), row ``i`` of ``x`` through env ``i``'s perturbed network; among the legal
        actions of ``masks`` (bool [envs, actions]) when given."""
        q = self.model.q
        if masks is None:
            return np.array([int(np.argmax(q.numpy_forward(x[i: i + 1], self.perturbed_params(i))))
                             for i in range(self.n_envs)])
        return np.array([int(np.argmax(np.where(masks[i], q.numpy_forward(x[i: i + 1], self.perturbed_params(i))[0],
                                                -np.inf)))
                         for i in range(self.n_envs)])

    def reset(self, indices: Sequence[int] | np.ndarray) -> None:
        """New perturbation directions for the envs ``indices`` (their episodes ended)."""
        for i in indices:
            self._noise[i] = self._draw()
            self._perturbed[i] = None

    def adapt(self, x: np.ndarray, eps: float) -> float:
        """Adapt sigma on encoded observations ``x`` toward the KL threshold of exploration rate ``eps``.

        Returns:
            the measured KL divergence (also kept in ``last_kl``; the threshold in ``last_threshold``).
        """
        params = self.model.numpy_params()
        adaptive = perturb(params, self._draw(), self.sigma)
        kl = mean_kl(self._forward_rows(x, params), self._forward_rows(x, adaptive))
        self.last_threshold = kl_threshold(eps, self.n_actions)
        self.spec.desired_action_stddev = self.last_threshold
        self.spec.adapt(kl)
        self.last_kl = kl
        return kl

    def _forward_rows(self, x: np.ndarray, params: Tree) -> np.ndarray:
        """Q-values row by row. One-row products stay single-threaded in OpenBLAS; a 32-row batch through a
        256x256 mlp took 8-16 ms (threads spinning on the 2 busy cores) against 32 x 17 us row by row."""
        q = self.model.q
        return np.concatenate([q.numpy_forward(x[i: i + 1], params) for i in range(len(x))], axis=0)

    def get_stats(self) -> dict[str, float]:
        """Log values: sigma, the last KL and its threshold."""
        return {"param_noise_sigma": self.sigma, "param_noise_kl": self.last_kl,
                "param_noise_threshold": self.last_threshold}

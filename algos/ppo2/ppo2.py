"""PPO2 (Schulman et al. 2017) in TensorFlow 2: ``learn`` and ``load``.

Speed design: the rollout acts in numpy when the network has a numpy mirror (mlp), so no TF call
happens per env step; one ``tf.function`` call per update runs all epochs and minibatches.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from algos.base import loader
from algos.on_policy import loop as on_policy
from algos.on_policy.symmetries import Symmetry, augment, env_symmetries
from algos.ppo2.model import PPO2Model
from common.buffers.rollout import RolloutStorage
from common.errors import ConfigError
from common.nn.tf_util import xla_pays
from common.schedules import make_schedule

if TYPE_CHECKING:
    from common.vec_env.base import VecEnv

ROLLOUT_SAMPLES = 2048  # automatic nsteps: about this many samples per rollout, over all envs
MIN_ROLLOUT_STEPS = 16  # ... but at least this many steps per env


def learn(*, env: VecEnv, network: str | Callable | None = None, total_timesteps: int, seed: int | None = None,
          load_path: str | None = None, **kwargs) -> PPO2Model:
    """Train a PPO2 policy on a VecEnv (arguments: the ``learn`` contract of algos/base.py). Returns the
    trained PPO2Model.
    """
    network, hp, network_kwargs = on_policy.settle("ppo2", env, network, kwargs)
    nenvs, noptepochs = env.num_envs, hp.noptepochs
    hp.nsteps = nsteps = hp.nsteps or max(-(-ROLLOUT_SAMPLES // nenvs), MIN_ROLLOUT_STEPS)
    nbatch = nenvs * nsteps
    on_policy.check_budget(nbatch, total_timesteps)
    lr_fn, cr_fn = make_schedule(hp.lr), make_schedule(hp.cliprange)
    # the feed-forward minibatch count (XLA is only for feed-forward networks; the model is not built yet)
    minibatches = hp.nminibatches or _auto_minibatches(nbatch, hp.minibatch_size, nenvs, recurrent=False)
    hp.jit_compile = xla_pays(hp.jit_compile, total_timesteps // nbatch * noptepochs * minibatches)
    run = on_policy.setup(env, PPO2Model, network, network_kwargs, hp, seed, load_path)
    model = run.model
    nminibatches = hp.nminibatches or _auto_minibatches(nbatch, hp.minibatch_size, nenvs, model.policy.recurrent)
    model.hyperparameters["nminibatches"] = nminibatches
    if model.policy.recurrent and nenvs % nminibatches:
        raise ConfigError(f"recurrent policies need num_envs ({nenvs}) divisible by nminibatches ({nminibatches})")
    if not model.policy.recurrent and nbatch < nminibatches:
        raise ConfigError(f"nsteps * num_envs ({nbatch}) is smaller than nminibatches ({nminibatches})")

    symmetries = _symmetries(run, hp) if hp.augment_symmetries else []

    def update(storage: RolloutStorage, frac: float, rng: np.random.Generator) -> dict:
        return _update(model, storage, lr_fn(frac), cr_fn(frac), noptepochs, nminibatches, rng, symmetries)

    return on_policy.train(run, hp, total_timesteps, update)


def _symmetries(run, hp) -> list[Symmetry]:
    """The env's symmetries for ``augment_symmetries`` (feed-forward policies on raw observations only)."""
    if run.model.policy.recurrent:
        raise ConfigError("augment_symmetries: not for recurrent policies (their samples are whole sequences)")
    if getattr(run.model.vec_normalize, "norm_obs", False):
        raise ConfigError("augment_symmetries permutes raw observations: set vec_normalize = false")
    return env_symmetries(run.env)


def _update(model: PPO2Model, st: RolloutStorage, lr: float, cliprange: float, noptepochs: int, nminibatches: int,
            rng: np.random.Generator, symmetries: list[Symmetry]) -> dict:
    if model.policy.recurrent:
        nenvs = st.nenvs
        idx = np.stack([rng.permutation(nenvs) for _ in range(noptepochs)]).reshape(noptepochs * nminibatches, -1)
        return model.train(lr, cliprange, st.obs, st.actions, st.returns, st.values, st.neglogps,
                           idx.astype(np.int32), st.states0, st.episode_starts, st.masks)
    batch = [st.flat(k) for k in ("obs", "actions", "returns", "values", "neglogps", "masks")]
    if symmetries:
        batch = _with_symmetric_copies(symmetries, *batch)
    n = len(batch[0])
    used = n - n % nminibatches  # each epoch leaves out a different random remainder when n is not divisible
    idx = np.stack([rng.permutation(n)[:used] for _ in range(noptepochs)]).reshape(noptepochs * nminibatches, -1)
    return model.train(lr, cliprange, *batch[:5], idx.astype(np.int32), masks=batch[5])


def _with_symmetric_copies(symmetries: list[Symmetry], obs, actions, returns, values, neglogps, masks) -> list:
    """The flat batch followed by its transformed copies (``augment``) with the original's returns, values and
    log-probabilities: a copy's move was drawn with its original's probability, so that is the importance
    weight's denominator (with the policy's own probability of the copied move there instead, tic-tac-toe
    against a random player learnt worse than without the copies)."""
    obs_s, actions_s, masks_s = augment(symmetries, obs, actions, masks)
    copies = len(symmetries) + 1
    return [np.concatenate([obs, obs_s]), np.concatenate([actions, actions_s]), np.tile(returns, copies),
            np.tile(values, copies), np.tile(neglogps, copies), None if masks is None else np.concatenate([masks, masks_s])]


def _auto_minibatches(nbatch: int, minibatch_size: int, nenvs: int, recurrent: bool) -> int:
    """Minibatches of about ``minibatch_size`` samples; recurrent policies split whole envs, so a divisor
    of the env count."""
    wanted = max(nbatch // minibatch_size, 1)
    if not recurrent:
        return wanted
    return max(d for d in range(1, nenvs + 1) if nenvs % d == 0 and d <= wanted)


load = loader(PPO2Model)

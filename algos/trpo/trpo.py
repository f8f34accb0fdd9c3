"""TRPO (Schulman et al. 2015; baselines' trpo_mpi) in TensorFlow 2: ``learn`` and ``load``.

``--alg=trpo_mpi`` is an alias. The rollout, GAE, truncation bootstrap, VecNormalize handling, logging
and evaluation are the on-policy skeleton's (``algos.on_policy``); this module adds the update. Under
``mpiexec -n K`` every rank collects ``timesteps_per_batch`` steps and the gradients, Fisher-vector
products and line-search losses are averaged over the ranks, so the parameters stay bit-identical.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from algos.base import loader
from algos.on_policy import loop as on_policy
from algos.trpo.model import TRPOModel
from common.buffers.rollout import RolloutStorage

if TYPE_CHECKING:
    from common.vec_env.base import VecEnv


def learn(*, env: VecEnv, network: str | Callable | None = None, total_timesteps: int, seed: int | None = None,
          load_path: str | None = None, **kwargs) -> TRPOModel:
    """Train a TRPO policy on a VecEnv (arguments: the ``learn`` contract of algos/base.py). ``network``
    must be feed-forward; the value function is a separate copy of it. Returns the trained TRPOModel.
    """
    network, hp, network_kwargs = on_policy.settle("trpo", env, network, kwargs)
    hp.nsteps = -(-hp.timesteps_per_batch // env.num_envs)  # steps per env of one rollout
    on_policy.check_budget(hp.nsteps * env.num_envs, total_timesteps, "timesteps_per_batch")
    run = on_policy.setup(env, TRPOModel, network, network_kwargs, hp, seed, load_path)
    model = run.model

    def update(st: RolloutStorage, _frac: float, rng: np.random.Generator) -> dict:
        n = st.nsteps * st.nenvs
        size = min(hp.vf_batch_size, n)
        per_epoch = n // size  # the last partial minibatch of an epoch is left out (baselines)
        idx = np.stack([rng.permutation(n)[:per_epoch * size] for _ in range(hp.vf_iters)] or
                       [np.zeros(0, np.int64)]).reshape(-1, size)
        return model.train(st.flat("obs"), st.flat("actions"), st.flat("advantages"), st.flat("returns"), idx,
                           st.flat("masks"))

    return on_policy.train(run, hp, total_timesteps, update)


load = loader(TRPOModel)

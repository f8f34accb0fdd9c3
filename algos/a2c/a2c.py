"""A2C (Mnih et al. 2016, synchronous; baselines' a2c) in TensorFlow 2: ``learn`` and ``load``.

The rollout, GAE (``lam = 1``: baselines' n-step returns), truncation bootstrap, VecNormalize handling,
logging and evaluation are the on-policy skeleton's (``algos.on_policy``); this module adds the update.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from algos.a2c.model import A2CModel
from algos.base import loader
from algos.on_policy import loop as on_policy
from common.buffers.rollout import RolloutStorage
from common.schedules import make_schedule

if TYPE_CHECKING:
    from common.vec_env.base import VecEnv


def learn(*, env: VecEnv, network: str | Callable | None = None, total_timesteps: int, seed: int | None = None,
          load_path: str | None = None, **kwargs) -> A2CModel:
    """Train an A2C policy on a VecEnv (arguments: the ``learn`` contract of algos/base.py; recurrent
    networks too). Returns the trained A2CModel.
    """
    network, hp, network_kwargs = on_policy.settle("a2c", env, network, kwargs)
    on_policy.check_budget(env.num_envs * hp.nsteps, total_timesteps)
    lr_fn = make_schedule(hp.lr)
    run = on_policy.setup(env, A2CModel, network, network_kwargs, hp, seed, load_path)
    model = run.model

    def update(st: RolloutStorage, frac: float, _rng: np.random.Generator) -> dict:
        if model.policy.recurrent:
            return model.train(lr_fn(frac), st.obs, st.actions, st.returns, st.values, st.states0, st.episode_starts,
                               st.masks)
        return model.train(lr_fn(frac), st.flat("obs"), st.flat("actions"), st.flat("returns"), st.flat("values"),
                           masks=st.flat("masks"))

    return on_policy.train(run, hp, total_timesteps, update)


load = loader(A2CModel)

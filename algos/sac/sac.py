"""Soft Actor-Critic (Haarnoja et al. 2018) in TensorFlow 2: ``learn`` and ``load``.

The loop is the off-policy one shared with ddpg and td3 (algos/offpolicy/loop.py): ``train_freq``
vec-env steps sampling the squashed-Gaussian policy in numpy, then ``gradient_steps`` gradient steps in
one ``tf.function`` call (model.py holds the losses).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from algos.base import loader
from algos.offpolicy.actor_critic import check_action_space
from algos.offpolicy.loop import train_with_gaussian_policy
from algos.sac.model import SACModel, parse_ent_coef

if TYPE_CHECKING:
    from common.vec_env.base import VecEnv


def learn(*, env: VecEnv, network: str | Callable | None = None, total_timesteps: int, seed: int | None = None,
          load_path: str | None = None, **kwargs) -> SACModel:
    """Train a SAC agent on a VecEnv with a Box action space (arguments: the ``learn`` contract of
    algos/base.py; ``network`` is the body of the actor and of each critic, an mlp of two ReLU layers of 256
    unless num_hidden / activation say otherwise). Returns the trained SACModel.
    """
    return train_with_gaussian_policy("sac", SACModel, _check_settings, env=env, network=network,
                                      total_timesteps=total_timesteps, seed=seed, load_path=load_path, kwargs=kwargs)


def _check_settings(env, hyper: dict) -> None:
    """One-line ConfigErrors for settings sac cannot run with."""
    check_action_space(env.action_space, "sac")
    parse_ent_coef(hyper["ent_coef"])




load = loader(SACModel)

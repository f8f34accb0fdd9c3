"""TQC, truncated quantile critics (Kuznetsov et al. 2020), in TensorFlow 2: ``learn`` and ``load``.

The loop is the off-policy one shared with ddpg, sac and td3 (algos/offpolicy/loop.py): ``train_freq``
vec-env steps sampling the squashed-Gaussian policy in numpy, then ``gradient_steps`` gradient steps in
one ``tf.function`` call (model.py holds the quantile critics and their truncated target).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from algos.base import loader
from algos.offpolicy.actor_critic import check_action_space
from algos.offpolicy.loop import train_with_gaussian_policy
from algos.sac.model import parse_ent_coef
from algos.tqc.model import TQCModel, check_quantile_settings

if TYPE_CHECKING:
    from common.vec_env.base import VecEnv


def learn(*, env: VecEnv, network: str | Callable | None = None, total_timesteps: int, seed: int | None = None,
          load_path: str | None = None, **kwargs) -> TQCModel:
    """Train a TQC agent on a VecEnv with a Box action space (arguments: the ``learn`` contract of
    algos/base.py; ``network`` is the body of the actor and of each critic, an mlp of two ReLU layers of 256
    unless num_hidden / activation say otherwise). Returns the trained TQCModel.
    """
    return train_with_gaussian_policy("tqc", TQCModel, _check_settings, env=env, network=network,
                                      total_timesteps=total_timesteps, seed=seed, load_path=load_path, kwargs=kwargs)


def check_settings(hyper: dict) -> None:
    """One-line ConfigErrors for tqc's own settings (the temperature and the quantiles)."""
    parse_ent_coef(hyper["ent_coef"])
    check_quantile_settings(hyper["n_quantiles"], hyper["n_critics"], hyper["top_quantiles_to_drop_per_net"])


def _check_settings(env, hyper: dict) -> None:
    """One-line ConfigErrors for settings tqc cannot run with."""
    check_action_space(env.action_space, "tqc")
    check_settings(hyper)


load = loader(TQCModel)

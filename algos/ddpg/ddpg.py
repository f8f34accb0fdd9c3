"""DDPG (Lillicrap et al. 2015) in TensorFlow 2: ``learn`` and ``load``.

The loop (algos/offpolicy/loop.py, shared with sac and td3) alternates blocks: ``nb_rollout_steps``
vec-env steps acting in numpy with per-env noise, then ``nb_train_steps`` gradient steps in one
``tf.function`` call (see model.py).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from algos.base import loader
from algos.ddpg.model import DDPGModel
from algos.offpolicy.actor_critic import check_action_space
from algos.offpolicy.exploration import noise_explorer
from algos.offpolicy.loop import start, train_off_policy
from common.errors import ConfigError
from common.noise import parse_noise_type

if TYPE_CHECKING:
    from common.vec_env.base import VecEnv

# The mlp used where the caller names no num_hidden, num_layers or activation: rl-baselines3-zoo's DDPG
# network. It is passed to the model as given network kwargs, so model files record it, and files saved with
# the earlier 64x64 tanh default (recorded as no kwargs) still load as such.
FALLBACK_MLP = {"num_hidden": [400, 300], "activation": "relu"}


def learn(*, env: VecEnv, network: str | Callable | None = None, total_timesteps: int, seed: int | None = None,
          load_path: str | None = None, **kwargs) -> DDPGModel:
    """Train a DDPG actor-critic on a VecEnv with a Box action space (arguments: the ``learn`` contract of
    algos/base.py; an mlp with none of num_hidden, num_layers, activation given is ``FALLBACK_MLP``).
    Returns the trained DDPGModel.
    """
    if (network or "mlp") == "mlp" and not {"num_hidden", "num_layers", "activation"} & set(kwargs):
        kwargs = {**FALLBACK_MLP, **kwargs}
    hp, run = start("ddpg", DDPGModel, env=env, network=network, seed=seed, load_path=load_path, kwargs=kwargs,
                    check=_check_settings, total_timesteps=total_timesteps, block=("nb_rollout_steps", "nb_train_steps"))
    noise_rng, param_rng, sample_rng, random_rng = run.rng.spawn(4)
    explorer = noise_explorer(run.model, hp.noise_type, env.num_envs, noise_rng, param_rng,
                              hp.param_noise_adaption_interval, parse_noise_type,
                              hp.random_action_share)
    return train_off_policy(run, env, explorer, hp, total_timesteps=total_timesteps, sample_rng=sample_rng,
                            random_rng=random_rng, block=("nb_rollout_steps", "nb_train_steps"))


def _check_settings(env, hyper: dict) -> None:
    """One-line ConfigErrors for settings ddpg cannot run with."""
    check_action_space(env.action_space, "ddpg")
    if hyper["popart"] and not hyper["normalize_returns"]:
        raise ConfigError("popart=True needs normalize_returns=True")




load = loader(DDPGModel)

"""TD3 (Fujimoto et al. 2018) in TensorFlow 2: ``learn`` and ``load``.

The loop is the off-policy one shared with ddpg and sac (algos/offpolicy/loop.py): ``train_freq``
vec-env steps acting in numpy with per-env action noise (ddpg's noise strings), then ``gradient_steps``
gradient steps in one ``tf.function`` call (model.py holds the losses and the policy delay).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from algos.base import loader
from algos.offpolicy.actor_critic import check_action_space
from algos.offpolicy.exploration import noise_explorer
from algos.offpolicy.loop import start, train_off_policy
from algos.td3.model import TD3Model
from common.noise import parse_noise_type

if TYPE_CHECKING:
    from common.vec_env.base import VecEnv


def learn(*, env: VecEnv, network: str | Callable | None = None, total_timesteps: int, seed: int | None = None,
          load_path: str | None = None, **kwargs) -> TD3Model:
    """Train a TD3 agent on a VecEnv with a Box action space (arguments: the ``learn`` contract of
    algos/base.py; ``network`` is the body of the actor and of each critic, an mlp of two ReLU layers of 256
    unless num_hidden / activation say otherwise). Returns the trained TD3Model.
    """
    hp, run = start("td3", TD3Model, env=env, network=network, seed=seed, load_path=load_path, kwargs=kwargs,
                    check=_check_settings, total_timesteps=total_timesteps)
    noise_rng, param_rng, sample_rng, random_rng = run.rng.spawn(4)
    run.model.train_rng = run.rng.spawn(1)[0]
    explorer = noise_explorer(run.model, hp.noise_type, env.num_envs, noise_rng, param_rng,
                              hp.param_noise_adaption_interval, parse_noise_type,
                              hp.random_action_share)
    return train_off_policy(run, env, explorer, hp, total_timesteps=total_timesteps, sample_rng=sample_rng,
                            random_rng=random_rng)


def _check_settings(env, hyper: dict) -> None:
    """One-line ConfigErrors for settings td3 cannot run with."""
    check_action_space(env.action_space, "td3")




load = loader(TD3Model)

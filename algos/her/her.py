"""Hindsight experience replay (Andrychowicz et al. 2017): ``learn`` and ``load``.

``--alg=her --her_algorithm=sac|tqc|td3|ddpg`` trains that algorithm's model in the shared off-policy loop
(algos/offpolicy/loop.py) with one change: the replay is ``common.buffers.her.HerReplayBuffer``, which
keeps the goal env's Dict observations per key (``common.buffers.dict_replay``'s storage) and relabels goals at sample time with the env's
``compute_reward``. The default base is sac: it needs no exploration-noise tuning, and rl-baselines3-zoo's
HER settings for the Fetch tasks are SAC/TQC ones (baselines' her was DDPG; ``--her_algorithm=ddpg``); the
Fetch entries of hyperparams/her.toml that need more than FetchReach use tqc, as rl-baselines3-zoo does.
The env must be a goal env: Dict observations ``observation`` / ``achieved_goal`` / ``desired_goal``, a
vectorised ``compute_reward`` and, for success rates, ``info["is_success"]``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from algos.base import loader
from algos.her.model import HER_MODELS
from algos.hyperparameters import table
from algos.offpolicy.actor_critic import check_action_space
from algos.offpolicy.exploration import GaussianExplorer, noise_explorer
from algos.offpolicy.loop import start, train_off_policy
from algos.sac.model import parse_ent_coef
from algos.tqc.model import check_quantile_settings
from common.buffers.her import (
    STRATEGIES,
    HerReplayBuffer,
    check_goal_space,
    vec_env_reward,
)
from common.errors import ConfigError
from common.files.model_file import ModelFile, ModelFileError
from common.noise import parse_noise_type
from common.vec_env import unwrap_vec_normalize

if TYPE_CHECKING:
    from algos.offpolicy.actor_critic import ActorCriticModel
    from common.vec_env.base import VecEnv


def learn(*, env: VecEnv, network: str | Callable | None = None, total_timesteps: int, seed: int | None = None,
          load_path: str | None = None, **kwargs) -> ActorCriticModel:
    """Train ``her_algorithm``'s model (default sac) with hindsight replay on a goal VecEnv.

    Args:
        env: VecEnv of a goal env (Dict observations, not flattened; any number of envs).
        network: registered network name or builder for the actor and critic bodies; None -> "mlp".
        total_timesteps: env steps in total (over all envs and, under MPI, all ranks).
        seed: seeds weights, noise, replay sampling and relabelling, TF and the env.
        load_path: model file to continue training from.
        kwargs: hyperparameters of hyperparams/her.toml (``her_algorithm``, ``goal_selection_strategy``,
            ``n_sampled_goal`` and the base algorithm's) and the network builder's parameters.

    Returns:
        the trained model (``algos.her.model``: the base algorithm's model saved as ``her``).
    """
    base = kwargs.get("her_algorithm", table("her").defaults["her_algorithm"])
    if base not in HER_MODELS:
        raise ConfigError(f"her_algorithm must be one of {', '.join(HER_MODELS)}, got {base!r}")
    hp, run = start("her", HER_MODELS[base], env=env, network=network, seed=seed, load_path=load_path,
                    kwargs=kwargs, check=_check_settings, total_timesteps=total_timesteps)
    noise_rng, param_rng, sample_rng, random_rng = run.rng.spawn(4)
    run.model.train_rng = run.rng.spawn(1)[0]  # sac's, tqc's and td3's training noise (ddpg draws none)
    if base in ("sac", "tqc"):  # a stochastic policy explores by itself
        explorer = GaussianExplorer(run.model, noise_rng)
    else:
        explorer = noise_explorer(run.model, hp.noise_type, env.num_envs, noise_rng, param_rng,
                                  hp.param_noise_adaption_interval, parse_noise_type,
                                  hp.random_action_share)
    buffer = HerReplayBuffer(hp.buffer_size, env.observation_space, run.model.act_dim, env.num_envs,
                             vec_env_reward(env), encode=run.model.encoder, strategy=hp.goal_selection_strategy,
                             n_sampled_goal=hp.n_sampled_goal)
    return train_off_policy(run, env, explorer, hp, total_timesteps=total_timesteps, sample_rng=sample_rng,
                            random_rng=random_rng, buffer=buffer)




def _check_settings(env, hyper: dict) -> None:
    """One-line ConfigErrors for envs and settings her cannot run with."""
    problem = check_goal_space(env.observation_space)
    if problem:
        raise ConfigError(f"her needs {problem}")
    if unwrap_vec_normalize(env) is not None:
        raise ConfigError("her relabels raw goals: drop vec_normalize (normalize_observations=True normalises "
                          "the network input instead)")
    check_action_space(env.action_space, "her")
    if hyper["goal_selection_strategy"] not in STRATEGIES:
        raise ConfigError(f"goal_selection_strategy must be one of {', '.join(STRATEGIES)}, got "
                          f"{hyper['goal_selection_strategy']!r}")
    if int(hyper["buffer_size"]) < env.num_envs:
        raise ConfigError(f"buffer_size ({hyper['buffer_size']}) must hold at least one step of each of the "
                          f"{env.num_envs} envs")
    parse_ent_coef(hyper["ent_coef"])
    deterministic_only = {"random_action_share": "sac and tqc explore by sampling their own policy",
                          "action_l2": "the deterministic actors; sac and tqc weigh their actions by the entropy term"}
    for name, why in deterministic_only.items():
        if hyper["her_algorithm"] in ("sac", "tqc") and hyper[name] > 0:
            raise ConfigError(f"{name} is for her_algorithm td3 or ddpg ({why})")
    if hyper["her_algorithm"] == "tqc":
        check_quantile_settings(hyper["n_quantiles"], hyper["n_critics"], hyper["top_quantiles_to_drop_per_net"])


def load(path: str, env: VecEnv | None = None, network: str | Callable | None = None) -> ActorCriticModel:
    """Load a her model file: the class of the ``her_algorithm`` it records (see ``algos.base.loader``)."""
    hyper = ModelFile(path).metadata.get("hyperparameters", {})
    base = hyper.get("her_algorithm", "sac") if isinstance(hyper, dict) else None
    if base not in HER_MODELS:
        raise ModelFileError(f"{path!r}: her_algorithm {base!r} is not one of {', '.join(HER_MODELS)}")
    return loader(HER_MODELS[base])(path, env, network)


load.model_class = HER_MODELS[table("her").defaults["her_algorithm"]]

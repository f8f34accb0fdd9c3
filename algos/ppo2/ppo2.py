"""PPO2 (Schulman et al. 2017) in TensorFlow 2: ``learn`` and ``load``.

Speed design: the rollout acts in numpy when the network has a numpy mirror (mlp), so no TF call
happens per env step; one ``tf.function`` call per update runs all epochs and minibatches.
"""
from __future__ import annotations

import os
import time

import numpy as np

from algos.ppo2.model import ALGORITHM, PPO2Model
from algos.ppo2.runner import Runner
from common import logger, mpi_util
from common.errors import ConfigError
from common.gae import explained_variance
from common.mpi_sync import combine_vec_normalize, mean_over_ranks
from common.policies import ActorCritic, ObsEncoder
from common.progress import get_progress, report_model
from common.schedules import make_schedule, schedule_spec
from common.serialization import (
    metadata_field,
    read_model_file,
    restore_model,
    space_from_json,
    trusted_network,
)
from common.tf_util import configure_threads, seed_everything
from common.vec_env import unwrap_vec_normalize


def _default_network(observation_space) -> str:
    return "cnn" if ObsEncoder(observation_space).is_image else "mlp"


def learn(
    *,
    env,
    network=None,
    total_timesteps: int,
    seed: int | None = None,
    nsteps: int = 2048,
    ent_coef: float = 0.0,
    lr=3e-4,
    vf_coef: float = 0.5,
    max_grad_norm: float | None = 0.5,
    gamma: float = 0.99,
    lam: float = 0.95,
    log_interval: int = 10,
    nminibatches: int = 4,
    noptepochs: int = 4,
    cliprange=0.2,
    save_interval: int = 0,
    load_path: str | None = None,
    value_network: str | None = None,
    **network_kwargs,
) -> PPO2Model:
    """Train a PPO2 policy on a VecEnv.

    Args:
        env: VecEnv to learn from.
        network: registered network name or builder; None -> "cnn" for image observations, else "mlp".
        total_timesteps: env steps in total (over all envs and, under MPI, all ranks).
        seed: seeds weights, action sampling, minibatch order, TF and the env (same seed -> same run);
            MPI rank r samples and seeds its envs with seed + 10000 * r.
        nsteps: steps per env per rollout (batch = nsteps * num_envs).
        ent_coef: entropy bonus coefficient.
        lr: learning rate: float, callable of the remaining-progress fraction (1 -> 0), or "lin_2.5e-4".
        vf_coef: value loss coefficient.
        max_grad_norm: global gradient-norm clip (None: no clipping).
        gamma: discount factor.
        lam: GAE lambda.
        log_interval: updates between log lines.
        nminibatches: minibatches per epoch (recurrent: the envs are split into this many groups).
        noptepochs: epochs over each rollout.
        cliprange: PPO clip range (and value clip range): float, callable or string like lr.
        save_interval: updates between checkpoints in the log folder (0: none).
        load_path: model file to continue training from.
        value_network: None (value head shares the policy network) or "copy" (its own network).
        network_kwargs: passed to the network builder (e.g. num_layers=2, num_hidden=64).

    Returns:
        the trained PPO2Model.
    """
    nenvs = env.num_envs
    nbatch = nenvs * int(nsteps)
    if nsteps < 1 or nminibatches < 1 or noptepochs < 1:
        raise ConfigError("nsteps, nminibatches and noptepochs must be positive integers")
    lr_fn, cr_fn = make_schedule(lr), make_schedule(cliprange)
    configure_threads()
    seed_everything(seed)
    if network is None:
        network = _default_network(env.observation_space)
    policy = ActorCritic(env.observation_space, env.action_space, network, value_network, seed, **network_kwargs)
    if policy.recurrent:
        if nenvs % nminibatches:
            raise ConfigError(f"recurrent policies need num_envs ({nenvs}) divisible by nminibatches ({nminibatches})")
    elif nbatch % nminibatches:
        raise ConfigError(f"nsteps * num_envs ({nbatch}) must be divisible by nminibatches ({nminibatches})")
    hyper = {"nsteps": nsteps, "ent_coef": ent_coef, "lr": schedule_spec(lr), "vf_coef": vf_coef, "max_grad_norm": max_grad_norm,
                 "gamma": gamma, "lam": lam, "nminibatches": nminibatches, "noptepochs": noptepochs,
                 "cliprange": schedule_spec(cliprange), "seed": seed}
    model = PPO2Model(policy, ent_coef=ent_coef, vf_coef=vf_coef, max_grad_norm=max_grad_norm, network=network,
                      network_kwargs=network_kwargs, value_network=value_network, hyperparameters=hyper)
    model.vec_normalize = unwrap_vec_normalize(env)
    report_model(model)  # Ctrl-C in the runner saves it; benchmarks evaluate it
    if load_path is not None:
        restore_model(model, read_model_file(load_path, ALGORITHM, env), env, training=True)
    if mpi_util.size() > 1:  # parameters start equal on every rank
        arrays = model.get_arrays()
        model.set_arrays(dict(zip(arrays, mpi_util.broadcast_arrays(list(arrays.values())))))

    nranks = mpi_util.size()
    rank_seed = mpi_util.setup_process_seed(seed)  # each rank its own data; weights were broadcast
    rng = np.random.default_rng(rank_seed)
    sample_rng, shuffle_rng = rng.spawn(2)
    if seed is not None:
        env.seed(rank_seed)
    runner = Runner(env, policy, env.reset(), nsteps, gamma, lam, sample_rng)
    policy.sync()
    nupdates = total_timesteps // (nbatch * nranks)
    progress = get_progress()
    tstart = time.perf_counter()
    for update in range(1, nupdates + 1):
        frac = 1.0 - (update - 1.0) / nupdates
        runner.run()
        combine_vec_normalize(model.vec_normalize)  # every rank normalises with the statistics of all ranks
        stats = _update(model, runner, lr_fn(frac), cr_fn(frac), noptepochs, nminibatches, shuffle_rng)
        model.num_timesteps += nbatch * nranks
        mean_return = _mean_ep(runner.ep_infos, "r")
        if progress is not None:
            progress.update(model.num_timesteps, mean_return)
        if update % log_interval == 0 or update == 1 or update == nupdates:
            elapsed = time.perf_counter() - tstart
            logger.logkv("misc/serial_timesteps", update * nsteps)
            logger.logkv("misc/nupdates", update)
            logger.logkv("misc/total_timesteps", update * nbatch * nranks)
            logger.logkv("fps", int(update * nbatch * nranks / elapsed))  # env steps/s of all ranks
            logger.logkv("misc/time_elapsed", elapsed)
            logger.logkvs(_rank_means(runner, stats))
            logger.dumpkvs()  # writes on rank 0 only
        if save_interval and update % save_interval == 0 and mpi_util.is_root() and logger.get_dir():
            ckdir = os.path.join(logger.get_dir(), "checkpoints")
            model.save(os.path.join(ckdir, f"{update:05d}.zip"))
    model.runner = runner
    return model


def _update(model: PPO2Model, runner: Runner, lr: float, cliprange: float, noptepochs: int, nminibatches: int,
            rng: np.random.Generator) -> dict:
    st = runner.storage
    if model.policy.recurrent:
        nenvs = st.nenvs
        idx = np.stack([rng.permutation(nenvs) for _ in range(noptepochs)]).reshape(noptepochs * nminibatches, -1)
        return model.train(lr, cliprange, st.obs, st.actions, st.returns, st.values, st.neglogps,
                           idx.astype(np.int32), st.states0, st.episode_starts)
    n = st.nsteps * st.nenvs
    idx = np.stack([rng.permutation(n) for _ in range(noptepochs)]).reshape(noptepochs * nminibatches, -1)
    return model.train(lr, cliprange, st.flat("obs"), st.flat("actions"), st.flat("returns"), st.flat("values"),
                       st.flat("neglogps"), idx.astype(np.int32))


def _rank_means(runner: Runner, stats: dict) -> dict[str, float]:
    """Logged statistics averaged over ranks: episode means weighted by episode counts (a collective)."""
    st, neps = runner.storage, len(runner.ep_infos)
    values = {"eprewmean": (_mean_ep(runner.ep_infos, "r"), neps), "eplenmean": (_mean_ep(runner.ep_infos, "l"), neps),
              "misc/explained_variance": (explained_variance(st.values.ravel(), st.returns.ravel()), 1)}
    values.update({"loss/" + k: (v, 1) for k, v in stats.items()})
    return mean_over_ranks(values)


def _mean_ep(ep_infos, key: str) -> float:
    return float(np.mean([e[key] for e in ep_infos])) if ep_infos else float("nan")


def load(path: str, env=None, network=None) -> PPO2Model:
    """Load a PPO2 model file. With ``env``: checks its spaces against the model's (ModelFileError on a
    mismatch) and restores the saved VecNormalize statistics into ``env``'s VecNormalize with
    ``training=False`` (evaluation use; set ``.training = True`` yourself to keep adapting them).
    ``network``: the user's own network when the file names one outside this project's registry."""
    opened = read_model_file(path, ALGORITHM, env)
    metadata = opened.metadata
    obs_space = space_from_json(metadata["observation_space"])
    act_space = space_from_json(metadata["action_space"])
    network = trusted_network(opened, network)
    kwargs = metadata["network_kwargs"]
    value_network = metadata_field(opened, "value_network", (str, type(None)), None)
    hp = metadata_field(opened, "hyperparameters", dict, {})
    policy = ActorCritic(obs_space, act_space, network, value_network, 0, **kwargs)
    model = PPO2Model(policy, ent_coef=hp.get("ent_coef", 0.0), vf_coef=hp.get("vf_coef", 0.5),
                      max_grad_norm=hp.get("max_grad_norm", 0.5), network=network,
                      network_kwargs=kwargs, value_network=value_network, hyperparameters=hp)
    model.vec_normalize = None
    restore_model(model, opened, env, training=False)
    return model

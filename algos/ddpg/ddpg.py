"""DDPG (Lillicrap et al. 2015) in TensorFlow 2: ``learn`` and ``load``.

The loop alternates blocks: ``nb_rollout_steps`` vec-env steps acting in numpy with per-env noise,
then ``nb_train_steps`` gradient steps in one ``tf.function`` call (see model.py).
"""
from __future__ import annotations

import time

import numpy as np
from gymnasium import spaces

from algos import hyperparameters, training
from algos.base import constructor_settings, loader
from algos.ddpg.exploration import Explorer
from algos.ddpg.model import DDPGModel
from common import mpi_util
from common.buffers.replay import ReplayBuffer, terminal_aware_next
from common.errors import ConfigError
from common.mpi_sync import combine_vec_normalize
from common.noise import NoiseTypeError, parse_noise_type


def check_action_space(space) -> None:
    """Raise ConfigError unless ``space`` is a Box with finite bounds."""
    if not isinstance(space, spaces.Box):
        raise ConfigError(f"ddpg needs a continuous (Box) action space; this env's is {space}")
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        raise ConfigError(f"ddpg needs finite action bounds to scale its tanh actor; this env's are {space}")
    if np.any(space.high <= space.low):
        raise ConfigError(f"action space {space} has an empty range (high <= low)")


def learn(*, env, network=None, total_timesteps: int, seed: int | None = None, load_path: str | None = None,
          **kwargs) -> DDPGModel:
    """Train a DDPG actor-critic on a VecEnv with a Box action space.

    Args:
        env: VecEnv to learn from (any number of envs).
        network: registered network name or builder for the actor and critic bodies; None -> "mlp".
        total_timesteps: env steps in total (over all envs and, under MPI, all ranks).
        seed: seeds weights, noise, replay sampling, TF and the env (same seed -> same run);
            MPI rank r explores, samples and seeds its envs with seed + 10000 * r.
        load_path: model file to continue training from.
        kwargs: hyperparameters of hyperparams/ddpg.toml (named and explained there; missing ones take
            its [defaults]) and the network builder's parameters (e.g. num_hidden=[400, 300]).

    Returns:
        the trained DDPGModel.
    """
    network = network or "mlp"
    hp, network_kwargs = hyperparameters.settle(hyperparameters.table("ddpg"), kwargs, network)
    hyper = hyperparameters.recorded(hp, seed=seed)
    _check_settings(env, hyper)
    nenvs, act_shape = env.num_envs, (int(np.prod(env.action_space.shape)),)
    run = training.setup(env, seed, lambda: DDPGModel(
        env.observation_space, env.action_space, network=network, network_kwargs=network_kwargs,
        seed=seed, hyperparameters=hyper, **constructor_settings(DDPGModel, hyper)), load_path, hp.save_interval)
    model, nranks = run.model, run.nranks
    noise_rng, param_rng, sample_rng, random_rng = run.rng.spawn(4)
    try:
        action_noise, param_noise = parse_noise_type(hp.noise_type, act_shape, nenvs, noise_rng)
    except NoiseTypeError as e:
        raise ConfigError(str(e)) from None
    explorer = Explorer(model, action_noise, param_noise, nenvs, param_rng)
    buffer = ReplayBuffer(hp.buffer_size, (model.obs_dim,), act_shape, np.float32, np.float32)
    rank_timesteps = total_timesteps // nranks
    x = model.encoder(env.reset())
    steps = train_steps = block = 0
    next_adapt = hp.param_noise_adaption_interval
    stats: dict[str, float] = {}
    while steps < rank_timesteps:
        block_start = steps
        for _ in range(hp.nb_rollout_steps):  # collect
            if steps * nranks < hp.learning_starts:
                unit = random_rng.uniform(-1.0, 1.0, (nenvs, *act_shape)).astype(np.float32)
            else:
                unit = explorer.actions(x)
            new_obs, rewards, dones, infos = env.step(model.scale_actions(unit))
            next_x = model.encoder(new_obs)
            stored_next, terminated = terminal_aware_next(next_x, dones, infos, model.encoder.encode_list)
            if np.any(dones):
                explorer.reset(np.flatnonzero(dones))
                run.episodes.add(infos)
            buffer.add(x, unit, rewards, stored_next, terminated)
            model.update_obs_stats(x)
            x = next_x
            steps += nenvs
            if steps >= rank_timesteps:
                break
        block += 1
        combine_vec_normalize(model.vec_normalize)  # every rank normalises with all ranks' statistics
        if len(buffer) >= hp.batch_size and steps * nranks >= hp.learning_starts:  # train
            t0 = time.perf_counter()
            stats = model.train(buffer.sample((hp.nb_train_steps, hp.batch_size), sample_rng))
            model.train_time += time.perf_counter() - t0
            train_steps += hp.nb_train_steps
            explorer.refresh()
            if param_noise is not None and train_steps >= next_adapt:
                next_adapt = train_steps + hp.param_noise_adaption_interval
                stats["param_noise_distance"] = explorer.adapt(buffer.sample(hp.batch_size, sample_rng)["obs"])
                stats["param_noise_stddev"] = param_noise.current_stddev
        t_prev, model.num_timesteps = model.num_timesteps, model.num_timesteps + (steps - block_start) * nranks
        run.progress(steps * nranks)
        if block % hp.log_interval == 0 or steps >= rank_timesteps:
            run.log(steps * nranks, {**stats, "n_updates": train_steps, "train_duration": model.train_time})
        run.periodic(t_prev, model.num_timesteps)
    if hp.normalize_observations and nranks > 1:  # the saved statistics hold every rank's last block too
        mpi_util.combine_running_mean_std(model.obs_rms)
        model.push_obs_stats()
        model.sync()
    model.train_steps = train_steps
    return run.finish()


def _check_settings(env, hyper: dict) -> None:
    """One-line ConfigErrors for settings ddpg cannot run with."""
    check_action_space(env.action_space)
    for name in ("nb_rollout_steps", "nb_train_steps", "batch_size", "buffer_size", "log_interval",
                 "param_noise_adaption_interval"):
        if int(hyper[name]) < 1:
            raise ConfigError(f"{name} must be a positive integer, got {hyper[name]}")
    if hyper["popart"] and not hyper["normalize_returns"]:
        raise ConfigError("popart=True needs normalize_returns=True")


load = loader(DDPGModel)

"""DDPG (Lillicrap et al. 2015) in TensorFlow 2: ``learn`` and ``load``.

The loop alternates blocks: ``nb_rollout_steps`` vec-env steps acting in numpy with per-env noise,
then ``nb_train_steps`` gradient steps in one ``tf.function`` call (see model.py).
"""
from __future__ import annotations

import time

import numpy as np
from gymnasium import spaces

from algos import training
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


def learn(
    *,
    env,
    network=None,
    total_timesteps: int,
    seed: int | None = None,
    nb_rollout_steps: int = 100,
    nb_train_steps: int = 50,
    batch_size: int = 64,
    noise_type: str = "adaptive-param_0.2",
    normalize_observations: bool = True,
    normalize_returns: bool = False,
    popart: bool = False,
    critic_l2_reg: float = 1e-2,
    actor_lr: float = 1e-4,
    critic_lr: float = 1e-3,
    gamma: float = 0.99,
    tau: float = 0.01,
    max_grad_norm: float | None = None,
    reward_scale: float = 1.0,
    learning_starts: int = 0,
    buffer_size: int = 1_000_000,
    param_noise_adaption_interval: int = 50,
    log_interval: int = 20,
    save_interval: int = 0,
    load_path: str | None = None,
    **network_kwargs,
) -> DDPGModel:
    """Train a DDPG actor-critic on a VecEnv with a Box action space.

    Args:
        env: VecEnv to learn from (any number of envs).
        network: registered network name or builder for the actor and critic bodies; None -> "mlp".
        total_timesteps: env steps in total (over all envs and, under MPI, all ranks).
        seed: seeds weights, noise, replay sampling, TF and the env (same seed -> same run);
            MPI rank r explores, samples and seeds its envs with seed + 10000 * r.
        nb_rollout_steps: vec-env steps per block before training.
        nb_train_steps: gradient steps per block (all in one TF call).
        batch_size: transitions per gradient step.
        noise_type: "none", "normal_S", "ou_S", "adaptive-param_S" or comma-separated combinations.
        normalize_observations: normalise observations with running statistics (saved in the model).
        normalize_returns: normalise the critic's targets with running statistics.
        popart: with normalize_returns, rescale the critic's output layer to keep its outputs (Pop-Art).
        critic_l2_reg: L2 penalty on the critic's weight matrices.
        actor_lr: actor Adam learning rate.
        critic_lr: critic Adam learning rate.
        gamma: discount factor.
        tau: soft target-update rate.
        max_grad_norm: global-norm clip of the actor gradients (None: none; baselines: clip_norm).
        reward_scale: rewards are multiplied by this for learning.
        learning_starts: env steps of uniformly random actions before training starts (all ranks).
        buffer_size: replay buffer capacity in transitions.
        param_noise_adaption_interval: gradient steps between parameter-noise adaptions.
        log_interval: blocks between log lines.
        save_interval: env steps between checkpoints in <log dir>/checkpoints (0: none).
        load_path: model file to continue training from.
        network_kwargs: passed to the network builder (e.g. num_hidden=[400, 300], activation="relu").

    Returns:
        the trained DDPGModel.
    """
    hyper = training.hyperparameters(locals())
    _check_settings(env, hyper)
    nenvs, act_shape = env.num_envs, (int(np.prod(env.action_space.shape)),)
    run = training.setup(env, seed, lambda: DDPGModel(
        env.observation_space, env.action_space, network=network or "mlp", network_kwargs=network_kwargs,
        seed=seed, hyperparameters=hyper, **constructor_settings(DDPGModel, hyper)), load_path, save_interval)
    model, nranks = run.model, run.nranks
    noise_rng, param_rng, sample_rng, random_rng = run.rng.spawn(4)
    try:
        action_noise, param_noise = parse_noise_type(noise_type, act_shape, nenvs, noise_rng)
    except NoiseTypeError as e:
        raise ConfigError(str(e)) from None
    explorer = Explorer(model, action_noise, param_noise, nenvs, param_rng)
    buffer = ReplayBuffer(buffer_size, (model.obs_dim,), act_shape, np.float32, np.float32)
    rank_timesteps = total_timesteps // nranks
    x = model.encoder(env.reset())
    steps = train_steps = block = 0
    next_adapt = param_noise_adaption_interval
    stats: dict[str, float] = {}
    while steps < rank_timesteps:
        block_start = steps
        for _ in range(nb_rollout_steps):  # collect
            if steps * nranks < learning_starts:
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
        if len(buffer) >= batch_size and steps * nranks >= learning_starts:  # train
            t0 = time.perf_counter()
            stats = model.train(buffer.sample((nb_train_steps, batch_size), sample_rng))
            model.train_time += time.perf_counter() - t0
            train_steps += nb_train_steps
            explorer.refresh()
            if param_noise is not None and train_steps >= next_adapt:
                next_adapt = train_steps + param_noise_adaption_interval
                stats["param_noise_distance"] = explorer.adapt(buffer.sample(batch_size, sample_rng)["obs"])
                stats["param_noise_stddev"] = param_noise.current_stddev
        t_prev, model.num_timesteps = model.num_timesteps, model.num_timesteps + (steps - block_start) * nranks
        run.progress(steps * nranks)
        if block % log_interval == 0 or steps >= rank_timesteps:
            run.log(steps * nranks, {**stats, "n_updates": train_steps, "train_duration": model.train_time})
        run.checkpoint(t_prev, model.num_timesteps)
    if normalize_observations and nranks > 1:  # the saved statistics hold every rank's last block too
        mpi_util.combine_running_mean_std(model.obs_rms)
        model.push_obs_stats()
        model.sync()
    model.train_steps, model.episodes = train_steps, run.episodes
    return model


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

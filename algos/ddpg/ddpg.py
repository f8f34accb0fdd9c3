"""DDPG (Lillicrap et al. 2015) in TensorFlow 2: ``learn`` and ``load``.

The loop alternates blocks: ``nb_rollout_steps`` vec-env steps acting in numpy with per-env noise,
then ``nb_train_steps`` gradient steps in one ``tf.function`` call (see model.py).
"""
from __future__ import annotations

import math
import os
import time
from collections import deque

import numpy as np
from gymnasium import spaces

from algos.ddpg.exploration import Explorer
from algos.ddpg.model import ALGORITHM, DDPGModel
from common import logger, mpi_util, progress
from common.errors import ConfigError
from common.mpi_sync import combine_vec_normalize, mean_over_ranks
from common.noise import NoiseTypeError, parse_noise_type
from common.replay_buffer import ReplayBuffer, terminal_aware_next
from common.serialization import (
    metadata_field,
    read_model_file,
    restore_model,
    space_from_json,
    trusted_network,
)
from common.tf_util import configure_threads, seed_everything
from common.vec_env import unwrap_vec_normalize


class DDPGConfigError(ConfigError):
    """ddpg cannot work with these settings or this env (a one-line message for the command line)."""


def check_action_space(space) -> None:
    """Raise DDPGConfigError unless ``space`` is a Box with finite bounds."""
    if not isinstance(space, spaces.Box):
        raise DDPGConfigError(f"ddpg needs a continuous (Box) action space; this env's is {space}")
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        raise DDPGConfigError(f"ddpg needs finite action bounds to scale its tanh actor; this env's are {space}")
    if np.any(space.high <= space.low):
        raise DDPGConfigError(f"action space {space} has an empty range (high <= low)")


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
    clip_norm: float | None = None,
    reward_scale: float = 1.0,
    learning_starts: int = 0,
    buffer_size: int = 1_000_000,
    eval_env=None,
    nb_eval_steps: int = 100,
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
        clip_norm: global-norm clip of the actor gradients (None: none).
        reward_scale: rewards are multiplied by this for learning.
        learning_starts: env steps of uniformly random actions before training starts (all ranks).
        buffer_size: replay buffer capacity in transitions.
        eval_env: optional VecEnv for deterministic evaluation every log interval.
        nb_eval_steps: vec-env steps of evaluation per log interval.
        param_noise_adaption_interval: gradient steps between parameter-noise adaptions.
        log_interval: blocks between log lines.
        save_interval: blocks between checkpoints in the log folder (0: none).
        load_path: model file to continue training from.
        network_kwargs: passed to the network builder (e.g. num_hidden=[400, 300], activation="relu").

    Returns:
        the trained DDPGModel.
    """
    check_action_space(env.action_space)
    for name, value in (("nb_rollout_steps", nb_rollout_steps), ("nb_train_steps", nb_train_steps),
                        ("batch_size", batch_size), ("buffer_size", buffer_size), ("log_interval", log_interval),
                        ("param_noise_adaption_interval", param_noise_adaption_interval)):
        if int(value) < 1:
            raise DDPGConfigError(f"{name} must be a positive integer, got {value}")
    if popart and not normalize_returns:
        raise DDPGConfigError("popart=True needs normalize_returns=True")
    nenvs = env.num_envs
    act_shape = (int(np.prod(env.action_space.shape)),)
    nranks = mpi_util.size()
    rank_seed = mpi_util.setup_process_seed(seed)  # each rank its own data; weights are broadcast below
    rng = np.random.default_rng(rank_seed)
    noise_rng, param_rng, sample_rng, random_rng = rng.spawn(4)
    try:
        action_noise, param_noise = parse_noise_type(noise_type, act_shape, nenvs, noise_rng)
    except NoiseTypeError as e:
        raise DDPGConfigError(str(e)) from None
    configure_threads()
    seed_everything(seed)
    hyper = {"nb_rollout_steps": nb_rollout_steps, "nb_train_steps": nb_train_steps, "batch_size": batch_size,
             "noise_type": noise_type, "normalize_observations": normalize_observations,
             "normalize_returns": normalize_returns, "popart": popart, "critic_l2_reg": critic_l2_reg,
             "actor_lr": actor_lr, "critic_lr": critic_lr, "gamma": gamma, "tau": tau, "clip_norm": clip_norm,
             "reward_scale": reward_scale, "learning_starts": learning_starts, "buffer_size": buffer_size,
             "seed": seed}
    try:
        model = DDPGModel(env.observation_space, env.action_space, network=network or "mlp",
                          network_kwargs=network_kwargs, seed=seed, gamma=gamma, tau=tau, actor_lr=actor_lr,
                          critic_lr=critic_lr, critic_l2_reg=critic_l2_reg, clip_norm=clip_norm,
                          reward_scale=reward_scale, normalize_observations=normalize_observations,
                          normalize_returns=normalize_returns, popart=popart, hyperparameters=hyper)
        explorer = Explorer(model, action_noise, param_noise, nenvs, param_rng)
    except (ValueError, TypeError) as e:
        raise DDPGConfigError(str(e)) from None
    model.vec_normalize = unwrap_vec_normalize(env)
    if load_path is not None:
        restore_model(model, read_model_file(load_path, ALGORITHM, env), env, training=True)
    if mpi_util.size() > 1:  # parameters start equal on every rank
        arrays = model.get_arrays()
        model.set_arrays(dict(zip(arrays, mpi_util.broadcast_arrays(list(arrays.values())))))
    progress.report_model(model)  # Ctrl-C in the runner saves it; benchmarks evaluate it

    buffer = ReplayBuffer(buffer_size, (model.obs_dim,), act_shape, np.float32, np.float32)
    if seed is not None:
        env.seed(rank_seed)
    rank_timesteps = total_timesteps // nranks
    x = model.encoder(env.reset())
    evaluator = _Evaluator(model, eval_env) if eval_env is not None else None
    episodes = _EpisodeStats()
    steps = train_steps = block = 0
    next_adapt = param_noise_adaption_interval
    train_time = 0.0
    stats: dict[str, float] = {}
    tstart = time.perf_counter()
    while steps < rank_timesteps:
        block_start = steps
        for _ in range(nb_rollout_steps):
            if steps * nranks < learning_starts:
                unit = random_rng.uniform(-1.0, 1.0, (nenvs, *act_shape)).astype(np.float32)
            else:
                unit = explorer.actions(x)
            new_obs, rewards, dones, infos = env.step(model.scale_actions(unit))
            next_x = model.encoder(new_obs)
            stored_next, terminated = _terminal_aware(model, next_x, dones, infos)
            if terminated is not None:
                explorer.reset(np.flatnonzero(dones))
                episodes.add(infos)
            buffer.add(x, unit, rewards, stored_next, terminated if terminated is not None else np.zeros(nenvs))
            model.update_obs_stats(x)
            x = next_x
            steps += nenvs
            if steps >= rank_timesteps:
                break
        block += 1
        combine_vec_normalize(model.vec_normalize)  # every rank normalises with all ranks' statistics
        if len(buffer) >= batch_size and steps * nranks >= learning_starts:
            t0 = time.perf_counter()
            batch = buffer.sample((nb_train_steps, batch_size), sample_rng)
            stats = model.train(batch)
            train_time += time.perf_counter() - t0
            train_steps += nb_train_steps
            explorer.refresh()
            if param_noise is not None and train_steps >= next_adapt:
                next_adapt = train_steps + param_noise_adaption_interval
                stats["param_noise_distance"] = explorer.adapt(buffer.sample(batch_size, sample_rng)["obs"])
                stats["param_noise_stddev"] = param_noise.current_stddev
        model.num_timesteps += (steps - block_start) * nranks
        progress.get_progress().update(steps * nranks, episodes.mean_return())
        last = steps >= rank_timesteps
        if block % log_interval == 0 or last:
            elapsed = time.perf_counter() - tstart
            logger.logkv("total/steps", steps * nranks)
            logger.logkv("total/train_steps", train_steps)
            logger.logkv("total/duration", elapsed)
            logger.logkv("total/train_duration", train_time)
            logger.logkv("total/steps_per_second", steps * nranks / max(elapsed, 1e-9))  # all ranks
            logger.logkv("rollout/episodes", int(mpi_util.allreduce_sum(np.array([episodes.count]))[0]))
            logger.logkvs(_rank_means(episodes, stats, evaluator, nb_eval_steps))
            logger.dumpkvs()  # writes on rank 0 only
        if save_interval and block % save_interval == 0 and mpi_util.is_root() and logger.get_dir():
            model.save(os.path.join(logger.get_dir(), "checkpoints", f"{block:05d}.zip"))
    if normalize_observations and nranks > 1:  # the saved statistics hold every rank's last block too
        mpi_util.combine_running_mean_std(model.obs_rms)
        model.push_obs_stats()
        model.sync()
    model.train_time = train_time
    model.train_steps = train_steps
    return model


def _rank_means(episodes: _EpisodeStats, stats: dict, evaluator, nb_eval_steps: int) -> dict[str, float]:
    """Logged statistics averaged over ranks, episode means weighted by episode counts (a collective)."""
    n = len(episodes.returns)
    values = {"rollout/return": (episodes.mean_return(), n), "rollout/episode_length": (episodes.mean_length(), n)}
    values.update({"train/" + k: (v, 1) for k, v in stats.items() if v is not None})
    if evaluator is not None:
        values["eval/return"] = (evaluator.run(nb_eval_steps), len(evaluator.returns))
    return mean_over_ranks(values)


def _terminal_aware(model: DDPGModel, next_x: np.ndarray, dones: np.ndarray, infos: list[dict]):
    """(next observations for replay, termination flags) of one step; flags None when no env finished.

    ``common.replay_buffer.terminal_aware_next`` on encoded observations: a finished env's stored next
    observation is its terminal one, and it bootstraps unless the episode really terminated.
    """
    if not np.any(dones):
        return next_x, None
    encoded = [dict(info, terminal_observation=model.encoder.encode_list([info["terminal_observation"]])[0])
               if "terminal_observation" in info else info for info in infos]
    return terminal_aware_next(next_x, dones, encoded)


class _EpisodeStats:
    """Returns and lengths of the last 100 finished episodes (from the Monitor's ``info["episode"]``)."""

    def __init__(self) -> None:
        self.returns: deque = deque(maxlen=100)
        self.lengths: deque = deque(maxlen=100)
        self.count = 0

    def add(self, infos: list[dict]) -> None:
        for info in infos:
            ep = info.get("episode")
            if ep is not None:
                self.returns.append(float(ep["r"]))
                self.lengths.append(int(ep["l"]))
                self.count += 1

    def mean_return(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")

    def mean_length(self) -> float:
        return float(np.mean(self.lengths)) if self.lengths else float("nan")


class _Evaluator:
    """Steps an eval VecEnv with the deterministic actor and reports the mean return of finished episodes."""

    def __init__(self, model: DDPGModel, env) -> None:
        self.model, self.env = model, env
        self.obs = env.reset()
        self.sums = np.zeros(env.num_envs)
        self.returns: deque = deque(maxlen=100)

    def run(self, nsteps: int) -> float:
        for _ in range(nsteps):
            actions, _ = self.model.predict(self.obs)
            self.obs, rewards, dones, infos = self.env.step(actions)
            self.sums += rewards
            for i in np.flatnonzero(dones):
                ep = infos[i].get("episode")
                self.returns.append(float(ep["r"]) if ep is not None else float(self.sums[i]))
                self.sums[i] = 0.0
        return float(np.mean(self.returns)) if self.returns else math.nan


def load(path: str, env=None, network=None) -> DDPGModel:
    """Load a DDPG model file. With ``env``: checks its spaces (ModelFileError on a mismatch) and
    restores the saved VecNormalize statistics into ``env``'s VecNormalize with ``training=False``.
    ``network``: the user's own network when the file names one outside this project's registry."""
    opened = read_model_file(path, ALGORITHM, env)
    metadata = opened.metadata
    hp = metadata_field(opened, "hyperparameters", dict, {})
    kinds = {"gamma": float, "tau": float, "actor_lr": float, "critic_lr": float, "critic_l2_reg": float,
             "clip_norm": (float, type(None)), "reward_scale": float, "normalize_observations": bool,
             "normalize_returns": bool, "popart": bool}
    settings = {k: metadata_field(opened, k, kind, None, hp) for k, kind in kinds.items() if k in hp}
    model = DDPGModel(space_from_json(metadata["observation_space"]), space_from_json(metadata["action_space"]),
                      network=trusted_network(opened, network), network_kwargs=metadata["network_kwargs"], seed=0,
                      hyperparameters=hp, **settings)
    restore_model(model, opened, env, training=False)
    return model

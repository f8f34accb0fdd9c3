"""PPO2 (Schulman et al. 2017) in TensorFlow 2: ``learn`` and ``load``.

Speed design: the rollout acts in numpy when the network has a numpy mirror (mlp), so no TF call
happens per env step; one ``tf.function`` call per update runs all epochs and minibatches.
"""
from __future__ import annotations

import numpy as np

from algos import training
from algos.base import constructor_settings, loader
from algos.ppo2.model import PPO2Model
from algos.ppo2.runner import Runner
from common.errors import ConfigError
from common.math_util import explained_variance
from common.mpi_sync import combine_vec_normalize
from common.obs_encoding import ObsEncoder
from common.schedules import ScheduleLike, make_schedule, schedule_spec


def learn(
    *,
    env,
    network=None,
    total_timesteps: int,
    seed: int | None = None,
    nsteps: int = 2048,
    ent_coef: float = 0.0,
    lr: ScheduleLike = 3e-4,
    vf_coef: float = 0.5,
    max_grad_norm: float | None = 0.5,
    gamma: float = 0.99,
    lam: float = 0.95,
    log_interval: int = 10,
    nminibatches: int = 4,
    noptepochs: int = 4,
    cliprange: ScheduleLike = 0.2,
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
        save_interval: env steps between checkpoints in <log dir>/checkpoints (0: none).
        load_path: model file to continue training from.
        value_network: None (value head shares the policy network) or "copy" (its own network).
        network_kwargs: passed to the network builder (e.g. num_layers=2, num_hidden=64).

    Returns:
        the trained PPO2Model.
    """
    hyper = training.hyperparameters({**locals(), "lr": schedule_spec(lr), "cliprange": schedule_spec(cliprange)})
    nenvs, nbatch = env.num_envs, env.num_envs * int(nsteps)
    if nsteps < 1 or nminibatches < 1 or noptepochs < 1:
        raise ConfigError("nsteps, nminibatches and noptepochs must be positive integers")
    lr_fn, cr_fn = make_schedule(lr), make_schedule(cliprange)
    network = network or ("cnn" if ObsEncoder(env.observation_space).is_image else "mlp")
    run = training.setup(env, seed, lambda: PPO2Model(
        env.observation_space, env.action_space, network=network, network_kwargs=network_kwargs, seed=seed,
        hyperparameters=hyper, **constructor_settings(PPO2Model, hyper)), load_path, save_interval)
    model = run.model
    if model.policy.recurrent and nenvs % nminibatches:
        raise ConfigError(f"recurrent policies need num_envs ({nenvs}) divisible by nminibatches ({nminibatches})")
    if not model.policy.recurrent and nbatch % nminibatches:
        raise ConfigError(f"nsteps * num_envs ({nbatch}) must be divisible by nminibatches ({nminibatches})")
    sample_rng, shuffle_rng = run.rng.spawn(2)
    runner = Runner(env, model.policy, env.reset(), nsteps, gamma, lam, sample_rng, run.episodes)
    model.policy.sync()
    nupdates = total_timesteps // (nbatch * run.nranks)
    for update in range(1, nupdates + 1):
        frac = 1.0 - (update - 1.0) / nupdates
        runner.run()
        combine_vec_normalize(model.vec_normalize)  # every rank normalises with the statistics of all ranks
        stats = _update(model, runner, lr_fn(frac), cr_fn(frac), noptepochs, nminibatches, shuffle_rng)
        t_prev, model.num_timesteps = model.num_timesteps, model.num_timesteps + nbatch * run.nranks
        run.progress(model.num_timesteps)
        if update % log_interval == 0 or update == 1 or update == nupdates:
            st = runner.storage
            stats["explained_variance"] = explained_variance(st.values.ravel(), st.returns.ravel())
            run.log(update * nbatch * run.nranks, stats, **{"train/n_updates": update})
        run.checkpoint(t_prev, model.num_timesteps)
    model.episodes = run.episodes
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


load = loader(PPO2Model)

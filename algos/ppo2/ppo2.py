"""PPO2 (Schulman et al. 2017) in TensorFlow 2: ``learn`` and ``load``.

Speed design: the rollout acts in numpy when the network has a numpy mirror (mlp), so no TF call
happens per env step; one ``tf.function`` call per update runs all epochs and minibatches.
"""
from __future__ import annotations

import numpy as np

from algos import hyperparameters, training
from algos.base import constructor_settings, loader
from algos.ppo2.model import PPO2Model
from algos.ppo2.runner import Runner
from common import mpi_util
from common.errors import ConfigError
from common.math_util import explained_variance
from common.mpi_sync import combine_vec_normalize
from common.obs_encoding import ObsEncoder
from common.schedules import make_schedule

ROLLOUT_SAMPLES = 2048  # automatic nsteps: about this many samples per rollout, over all envs
MIN_ROLLOUT_STEPS = 16  # ... but at least this many steps per env


def learn(*, env, network=None, total_timesteps: int, seed: int | None = None, load_path: str | None = None,
          **kwargs) -> PPO2Model:
    """Train a PPO2 policy on a VecEnv.

    Args:
        env: VecEnv to learn from.
        network: registered network name or builder; None -> "cnn" for image observations, else "mlp".
        total_timesteps: env steps in total (over all envs and, under MPI, all ranks).
        seed: seeds weights, action sampling, minibatch order, TF and the env (same seed -> same run);
            MPI rank r samples and seeds its envs with seed + 10000 * r.
        load_path: model file to continue training from.
        kwargs: hyperparameters of hyperparams/ppo2.toml (named and explained there; missing ones take
            its [defaults]) and the network builder's parameters (e.g. num_layers=2, num_hidden=64).

    Returns:
        the trained PPO2Model.
    """
    network = network or ("cnn" if ObsEncoder(env.observation_space).is_image else "mlp")
    hp, network_kwargs = hyperparameters.settle(hyperparameters.table("ppo2"), kwargs, network)
    if min(hp.nsteps, hp.nminibatches) < 0 or hp.noptepochs < 1 or hp.minibatch_size < 1:
        raise ConfigError("nsteps and nminibatches must be >= 0 (0: automatic), noptepochs and minibatch_size >= 1")
    nenvs, noptepochs = env.num_envs, hp.noptepochs
    hp.nsteps = nsteps = hp.nsteps or max(-(-ROLLOUT_SAMPLES // nenvs), MIN_ROLLOUT_STEPS)
    nbatch = nenvs * nsteps
    if 0 < total_timesteps < nbatch * mpi_util.size():
        raise ConfigError(f"nsteps * num_envs{' * ranks' if mpi_util.size() > 1 else ''} "
                          f"({nbatch * mpi_util.size()}) exceeds total_timesteps ({total_timesteps}): "
                          "no update would run; lower nsteps or train longer")
    hyper = hyperparameters.recorded(hp, seed=seed)
    lr_fn, cr_fn = make_schedule(hp.lr), make_schedule(hp.cliprange)
    run = training.setup(env, seed, lambda: PPO2Model(
        env.observation_space, env.action_space, network=network, network_kwargs=network_kwargs, seed=seed,
        hyperparameters=hyper, **constructor_settings(PPO2Model, hyper)), load_path, hp.save_interval)
    model = run.model
    nminibatches = hp.nminibatches or _auto_minibatches(nbatch, hp.minibatch_size, nenvs, model.policy.recurrent)
    model.hyperparameters["nminibatches"] = nminibatches
    if model.policy.recurrent and nenvs % nminibatches:
        raise ConfigError(f"recurrent policies need num_envs ({nenvs}) divisible by nminibatches ({nminibatches})")
    if not model.policy.recurrent and nbatch < nminibatches:
        raise ConfigError(f"nsteps * num_envs ({nbatch}) is smaller than nminibatches ({nminibatches})")
    sample_rng, shuffle_rng = run.rng.spawn(2)
    runner = Runner(env, model.policy, env.reset(), nsteps, hp.gamma, hp.lam, sample_rng, run.episodes)
    model.policy.sync()
    nupdates = total_timesteps // (nbatch * run.nranks)
    for update in range(1, nupdates + 1):
        frac = 1.0 - (update - 1.0) / nupdates
        runner.run()
        combine_vec_normalize(model.vec_normalize)  # every rank normalises with the statistics of all ranks
        stats = _update(model, runner, lr_fn(frac), cr_fn(frac), noptepochs, nminibatches, shuffle_rng)
        t_prev, model.num_timesteps = model.num_timesteps, model.num_timesteps + nbatch * run.nranks
        run.progress(model.num_timesteps)
        if update % hp.log_interval == 0 or update == 1 or update == nupdates:
            st = runner.storage
            stats["explained_variance"] = explained_variance(st.values.ravel(), st.returns.ravel())
            run.log(update * nbatch * run.nranks, stats, **{"train/n_updates": update})
        run.periodic(t_prev, model.num_timesteps)
    return run.finish()


def _update(model: PPO2Model, runner: Runner, lr: float, cliprange: float, noptepochs: int, nminibatches: int,
            rng: np.random.Generator) -> dict:
    st = runner.storage
    if model.policy.recurrent:
        nenvs = st.nenvs
        idx = np.stack([rng.permutation(nenvs) for _ in range(noptepochs)]).reshape(noptepochs * nminibatches, -1)
        return model.train(lr, cliprange, st.obs, st.actions, st.returns, st.values, st.neglogps,
                           idx.astype(np.int32), st.states0, st.episode_starts)
    n = st.nsteps * st.nenvs
    used = n - n % nminibatches  # each epoch leaves out a different random remainder when n is not divisible
    idx = np.stack([rng.permutation(n)[:used] for _ in range(noptepochs)]).reshape(noptepochs * nminibatches, -1)
    return model.train(lr, cliprange, st.flat("obs"), st.flat("actions"), st.flat("returns"), st.flat("values"),
                       st.flat("neglogps"), idx.astype(np.int32))


def _auto_minibatches(nbatch: int, minibatch_size: int, nenvs: int, recurrent: bool) -> int:
    """Minibatches of about ``minibatch_size`` samples; recurrent policies split whole envs, so a divisor
    of the env count."""
    wanted = max(nbatch // minibatch_size, 1)
    if not recurrent:
        return wanted
    return max(d for d in range(1, nenvs + 1) if nenvs % d == 0 and d <= wanted)


load = loader(PPO2Model)

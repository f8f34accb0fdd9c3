"""The ``learn()`` skeleton of the on-policy algorithms (ppo2, a2c, trpo): settle the settings, set up the
model, then rollout -> update -> log -> checkpoints/evaluations. Each algorithm supplies its update rule."""
from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from algos import hyperparameters, training
from algos.base import constructor_settings
from algos.on_policy.runner import Runner
from algos.selfplay import hook as self_play
from common.buffers.rollout import RolloutStorage
from common.errors import ConfigError
from common.files.checkpoint import Values
from common.logs import logger
from common.math_util import explained_variance
from common.mpi import mpi_util
from common.mpi.mpi_sync import combine_vec_normalize
from common.nn.obs_encoding import ObsEncoder

# update(storage, frac, rng) -> train/* statistics; frac is the remaining fraction of training (1 -> 0,
# for schedules), rng this rank's generator for minibatch order.
UpdateFn = Callable[[RolloutStorage, float, np.random.Generator], dict[str, float]]


def settle(algorithm: str, env: Any, network: Any, kwargs: Mapping[str, Any]) -> tuple[Any, types.SimpleNamespace, dict]:
    """(network, hyperparameters, network kwargs) of one ``learn()`` call: network None -> "cnn" for image
    observations, else "mlp"; the kwargs checked against ``hyperparams/<algorithm>.toml``."""
    network = network or ("cnn" if ObsEncoder(env.observation_space).is_image else "mlp")
    hp, network_kwargs = hyperparameters.settle(hyperparameters.table(algorithm), kwargs, network)
    return network, hp, network_kwargs


def check_budget(nbatch: int, total_timesteps: int, setting: str = "nsteps") -> None:
    """ConfigError when one rollout of all envs and ranks (``nbatch`` per rank, set by ``setting``) exceeds
    the budget."""
    if 0 < total_timesteps < nbatch * mpi_util.size():
        size = "nsteps * num_envs" if setting == "nsteps" else setting
        raise ConfigError(f"{size}{' * ranks' if mpi_util.size() > 1 else ''} "
                          f"({nbatch * mpi_util.size()}) exceeds total_timesteps ({total_timesteps}): "
                          f"no update would run; lower {setting} or train longer")


def budget_note(algorithm: str, total_timesteps: int, nsteps: int, num_envs: int, nranks: int) -> str:
    """The line saying how many of ``total_timesteps`` are trained: whole rollouts of all envs and ranks."""
    nbatch = nsteps * num_envs * nranks
    ranks = f" x {nranks} ranks" if nranks > 1 else ""
    return (f"note: {algorithm} trains {total_timesteps // nbatch * nbatch} of the {total_timesteps} timesteps: "
            f"whole rollouts of {nbatch} steps ({nsteps} per env x {num_envs} env(s){ranks})")


def setup(env: Any, model_class: type, network: Any, network_kwargs: dict, hp: types.SimpleNamespace,
          seed: int | None, load_path: str | None) -> training.TrainingRun:
    """``training.setup`` with a ``model_class`` built from the settled hyperparameters (recorded in its files)."""
    hyper = hyperparameters.recorded(hp, seed=seed)
    return training.setup(env, seed, lambda: model_class(
        env.observation_space, env.action_space, network=network, network_kwargs=network_kwargs, seed=seed,
        hyperparameters=hyper, **constructor_settings(model_class, hyper)), load_path, hp.save_interval)


def train(run: training.TrainingRun, hp: types.SimpleNamespace, total_timesteps: int, update: UpdateFn,
          after_update: Callable[[int, int], None] | None = None) -> Any:
    """The loop: ``total_timesteps // (nsteps * envs * ranks)`` rounds of a rollout of ``hp.nsteps`` steps
    per env (GAE with ``hp.gamma``, ``hp.lam``), VecNormalize statistics combined over ranks, ``update``,
    ``after_update(t_prev, t)`` when given, else self-play's pool when ``hp.self_play`` (``algos.selfplay.hook``,
    the same for ppo2, a2c and trpo), a log line every ``hp.log_interval`` updates (and the first and last),
    checkpoints and evaluations. Returns the trained model."""
    if after_update is None:
        after_update = self_play.start(run, hp)
    model, env = run.model, run.env
    sample_rng, update_rng = run.rng.spawn(2)
    runner = Runner(env, model.policy, env.reset(), hp.nsteps, hp.gamma, hp.lam, sample_rng, run.episodes,
                    hp.sde_sample_freq, hp.bootstrap_truncations)
    model.policy.sync()
    nbatch = hp.nsteps * env.num_envs * run.nranks
    nupdates = total_timesteps // nbatch
    if total_timesteps % nbatch:
        logger.log(budget_note(model.algorithm, total_timesteps, hp.nsteps, env.num_envs, run.nranks))
    done = Values(updates=0)
    run.track(loop=done, runner=runner, update_rng=update_rng,
              **({"after_update": after_update} if hasattr(after_update, "load_state") else {}))
    if run.resume() is False:  # the envs restarted their episodes
        runner.restart_episodes(env.reset())
    for n in range(done.updates + 1, nupdates + 1):
        frac = 1.0 - (n - 1.0) / nupdates
        runner.run()
        run.check_observations(runner.storage.obs, model.num_timesteps, rollout=True)
        run.check_observations(runner.obs, model.num_timesteps + nbatch)
        run.check_rewards(runner.storage.rewards, model.num_timesteps + nbatch)
        combine_vec_normalize(model.vec_normalize)  # every rank normalises with the statistics of all ranks
        stats = update(runner.storage, frac, update_rng)
        t_prev, model.num_timesteps = model.num_timesteps, model.num_timesteps + nbatch
        run.progress(model.num_timesteps)
        if after_update is not None:
            after_update(t_prev, model.num_timesteps)
        if n % hp.log_interval == 0 or n == 1 or n == nupdates:
            st = runner.storage
            stats["explained_variance"] = explained_variance(st.values.ravel(), st.returns.ravel())
            run.log(n * nbatch, stats, **{"train/n_updates": n})
        done.updates = n
        run.periodic(t_prev, model.num_timesteps)
    return run.finish()

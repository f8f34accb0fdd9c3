"""The training loop of the off-policy actor-critics (ddpg, sac, td3), written once.

Blocks alternate: ``rollout_steps`` vec-env steps acting in numpy (uniformly random actions in [-1, 1] until
``learning_starts`` env steps unless the explorer ``acts_at_warmup``, then the explorer's), every transition stored in one replay buffer with the
truncation bootstrap of ``terminal_aware_next``; then ``train_steps`` gradient steps on batches sampled in
numpy beforehand, all in ONE call of the model's fused ``tf.function``. Then progress, log lines,
checkpoints and evaluations (``algos.training``). ddpg names the two block sizes ``nb_rollout_steps`` /
``nb_train_steps``; sac and td3 use stable-baselines3's ``train_freq`` / ``gradient_steps`` (same meaning:
vec-env steps, i.e. steps per env, between training blocks, and gradient steps per block).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from algos import hyperparameters, training
from algos.base import constructor_settings
from common.buffers.dict_replay import DictReplayBuffer
from common.buffers.replay import ReplayBuffer, terminal_aware_next
from common.files.checkpoint import Values
from common.mpi import mpi_util
from common.mpi.mpi_sync import combine_vec_normalize
from common.nn.obs_encoding import MultiInputEncoder
from common.nn.tf_util import xla_pays

if TYPE_CHECKING:
    from algos.offpolicy.actor_critic import ActorCriticModel
    from algos.offpolicy.exploration import (
        Explorer,
        GaussianExplorer,
        StateDependentExplorer,
    )
    from common.vec_env.base import VecEnv, VecObs


def start(alg: str, model_class: type, *, env: VecEnv, network: str | Callable | None, seed: int | None,
          load_path: str | None, kwargs: dict, check: Callable[[Any, dict], None], total_timesteps: int = 0,
          block: tuple[str, str] = ("train_freq", "gradient_steps")) -> tuple[SimpleNamespace, training.TrainingRun]:
    """Settle ``kwargs`` against ``hyperparams/<alg>.toml``, ``check(env, hyperparameters)`` (ConfigError on
    settings the algorithm cannot run with), and ``training.setup`` a ``model_class`` built from them.
    ``jit_compile = "auto"`` becomes whether the run's gradient steps (``total_timesteps`` and the ``block``
    sizes, as ``train_off_policy``) repay XLA's compilation."""
    network = network or "mlp"
    hp, network_kwargs = hyperparameters.settle(hyperparameters.table(alg), kwargs, network)
    per_block = max(int(getattr(hp, block[0])), 1) * env.num_envs
    gradient_steps = max(total_timesteps - hp.learning_starts, 0) // per_block * int(getattr(hp, block[1]))
    hp.jit_compile = xla_pays(hp.jit_compile, gradient_steps)
    hyper = hyperparameters.recorded(hp, seed=seed)
    check(env, hyper)
    run = training.setup(env, seed, lambda: model_class(
        env.observation_space, env.action_space, network=network, network_kwargs=network_kwargs,
        seed=seed, hyperparameters=hyper, **constructor_settings(model_class, hyper)), load_path, hp.save_interval)
    return hp, run


def train_with_gaussian_policy(alg: str, model_class: type, check: Callable[[Any, dict], None], *, env: VecEnv,
                               network: str | Callable | None, total_timesteps: int, seed: int | None,
                               load_path: str | None, kwargs: dict) -> Any:
    """``start`` and ``train_off_policy`` for a squashed-Gaussian actor (sac, tqc): actions sampled from the
    policy, or with ``use_sde`` its state-dependent noise (``sde_sample_freq``, ``use_sde_at_warmup``); the
    generators spawned in one fixed order."""
    from algos.offpolicy.exploration import GaussianExplorer, StateDependentExplorer

    hp, run = start(alg, model_class, env=env, network=network, seed=seed, load_path=load_path, kwargs=kwargs,
                    check=check, total_timesteps=total_timesteps)
    policy_rng, _, sample_rng, random_rng = run.rng.spawn(4)
    run.model.train_rng = run.rng.spawn(1)[0]
    explorer = (StateDependentExplorer(run.model, policy_rng, env.num_envs, hp.sde_sample_freq, hp.use_sde_at_warmup)
                if run.model.use_sde else GaussianExplorer(run.model, policy_rng))
    return train_off_policy(run, env, explorer, hp, total_timesteps=total_timesteps,
                            sample_rng=sample_rng, random_rng=random_rng)


class EncodedReplay(ReplayBuffer):
    """The loop's default replay: encoded observations, next ones with the truncation bootstrap of
    ``terminal_aware_next``."""

    def __init__(self, size: int, model) -> None:
        super().__init__(size, (model.obs_dim,), (model.act_dim,), np.float32, np.float32)
        self.encode_list = model.encoder.encode_list

    def store(self, obs: VecObs, x: np.ndarray, actions: np.ndarray, rewards: np.ndarray, new_obs: VecObs,
              next_x: np.ndarray, dones: np.ndarray, infos: list[dict]) -> None:
        """Store one vec-env step from its raw (``obs``, ``new_obs``) and encoded (``x``, ``next_x``) forms."""
        stored_next, terminated = terminal_aware_next(next_x, dones, infos, self.encode_list)
        self.add(x, actions, rewards, stored_next, terminated)


def default_replay(size: int, model: ActorCriticModel, n_envs: int) -> EncodedReplay | DictReplayBuffer:
    """The loop's replay for ``model``: its raw Dict observations per key (``DictReplayBuffer``) when it
    keeps them as Dicts, else its encoded observations (``EncodedReplay``)."""
    if isinstance(model.encoder, MultiInputEncoder):
        return DictReplayBuffer(size, model.observation_space, model.act_dim, n_envs, encode=model.encoder)
    return EncodedReplay(size, model)


def train_off_policy(run: training.TrainingRun, env: VecEnv,
                     explorer: Explorer | GaussianExplorer | StateDependentExplorer, hp: SimpleNamespace, *,
                     total_timesteps: int, sample_rng: np.random.Generator, random_rng: np.random.Generator,
                     block: tuple[str, str] = ("train_freq", "gradient_steps"), buffer: Any = None) -> Any:
    """Train ``run.model`` on ``env`` for ``total_timesteps`` env steps (all envs and ranks); returns it.

    ``explorer``: ``actions(x)``, ``start_block()``, ``reset(indices)``, ``after_train(train_steps,
    sample_obs) -> stats``, ``acts_at_warmup`` (algos.offpolicy.exploration). ``hp``: the settled hyperparameters (``batch_size``, ``buffer_size``,
    ``learning_starts``, ``log_interval`` and the two of ``block``: the names of the vec-env steps and of
    the gradient steps of a block). ``sample_rng`` samples the batches, ``random_rng`` the actions before
    ``learning_starts``. ``buffer``: the replay (``store`` of one step, ``sample(shape, rng)`` of encoded
    batches, ``len``: transitions it can sample; ``restart()``: the envs started new episodes); None:
    ``default_replay`` of ``hp.buffer_size`` (``common.buffers.her.HerReplayBuffer`` is the other one).
    """
    rollout_steps, train_steps = int(getattr(hp, block[0])), int(getattr(hp, block[1]))
    batch_size, learning_starts, log_interval = hp.batch_size, hp.learning_starts, hp.log_interval
    model, nranks, nenvs = run.model, run.nranks, env.num_envs
    act_shape = (model.act_dim,)
    buffer = default_replay(hp.buffer_size, model, nenvs) if buffer is None else buffer
    rank_timesteps = total_timesteps // nranks
    # the loop's own variables: the current raw and encoded observations, env steps of this rank, gradient
    # steps, blocks
    first = env.reset()
    s = Values(obs=first, x=model.encoder(first), steps=0, train_steps=0, block=0)
    stats: dict[str, float] = {}
    run.track(loop=s, buffer=buffer, explorer=explorer, sample_rng=sample_rng, random_rng=random_rng,
              **({"train_rng": model.train_rng} if hasattr(model, "train_rng") else {}))
    if run.resume() is False:  # the envs restarted their episodes
        s.obs = env.reset()
        s.x = model.encoder(s.obs)
        explorer.reset(np.arange(nenvs))
        buffer.restart()
    while s.steps < rank_timesteps:
        block_start = s.steps
        explorer.start_block()
        for _ in range(rollout_steps):  # collect
            if s.steps * nranks < learning_starts and not explorer.acts_at_warmup:
                unit = random_rng.uniform(-1.0, 1.0, (nenvs, *act_shape)).astype(np.float32)
            else:
                unit = explorer.actions(s.x)
            new_obs, rewards, dones, infos = env.step(model.scale_actions(unit))
            run.check_observations(new_obs, (s.steps + nenvs) * nranks)
            run.check_rewards(rewards, s.steps * nranks)
            next_x = model.encoder(new_obs)
            if np.any(dones):
                explorer.reset(np.flatnonzero(dones))
                run.episodes.add(infos)
            buffer.store(s.obs, s.x, unit, rewards, new_obs, next_x, dones, infos)
            model.update_obs_stats(s.x)
            s.obs, s.x = new_obs, next_x
            s.steps += nenvs
            if s.steps >= rank_timesteps:
                break
        s.block += 1
        combine_vec_normalize(model.vec_normalize)  # every rank normalises with all ranks' statistics
        if len(buffer) >= batch_size and s.steps * nranks >= learning_starts:  # train
            model.set_progress(max(1.0 - block_start * nranks / max(total_timesteps, 1), 0.0))  # as of the block's start
            t0 = time.perf_counter()
            stats = model.train(buffer.sample((train_steps, batch_size), sample_rng))
            model.train_time += time.perf_counter() - t0
            s.train_steps += train_steps
            stats.update(explorer.after_train(s.train_steps, lambda: buffer.sample(batch_size, sample_rng)["obs"]))
        t_prev, model.num_timesteps = model.num_timesteps, model.num_timesteps + (s.steps - block_start) * nranks
        run.progress(s.steps * nranks)
        if s.block % log_interval == 0 or s.steps >= rank_timesteps:
            run.log(s.steps * nranks, {**stats, "n_updates": s.train_steps, "train_duration": model.train_time})
        run.periodic(t_prev, model.num_timesteps)
    if model.normalize_observations and nranks > 1:  # the saved statistics hold every rank's last block too
        mpi_util.combine_running_mean_std(model.obs_rms)
        model.push_obs_stats()
        model.sync()
    model.train_steps = s.train_steps
    return run.finish()

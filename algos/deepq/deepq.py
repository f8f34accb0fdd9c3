"""DQN (Mnih et al. 2015) with double Q, dueling heads, prioritized replay, n-step returns, distributional heads
(C51, QR-DQN) and noisy layers, in TensorFlow 2: ``learn``, ``load``; ``train`` is the loop of deepq and of the
algorithms that are deepq with other defaults (qrdqn, rainbow).

Runs on a VecEnv with any number of envs and bootstraps through time-limit truncation (the replay buffer
stores ``terminal_observation`` and marks only real terminations as done). Acts uniformly at random until
``learning_starts``, then epsilon-greedily on the schedule, or with ``param_noise=True`` greedily with a
perturbed copy of the Q-network per env (``param_noise.py``). Every step count is in env steps summed over
all envs. Acting runs the numpy mirror of the Q-network (mlp); every ``train_freq`` env steps the
``gradient_steps`` updates run in one ``tf.function`` call on batches sampled in numpy beforehand (with
prioritized replay the priorities are updated after each call). With ``n_step`` > 1 the transitions reach
the buffer through per-env queues (``common.buffers.nstep``); with ``noisy`` the online network acts under
fresh noise after ``learning_starts`` (epsilon 0).
"""
from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from algos import hyperparameters, training
from algos.base import constructor_settings, loader
from algos.deepq.model import DQNModel, check_action_space
from algos.deepq.param_noise import ParamNoiseExplorer
from common.buffers.nstep import NStepQueues
from common.buffers.prioritized import PrioritizedReplayBuffer
from common.buffers.replay import ReplayBuffer, terminal_aware_next
from common.errors import ConfigError
from common.files.checkpoint import Values
from common.mpi import mpi_util
from common.nn.obs_encoding import ObsEncoder
from common.nn.tf_util import xla_pays
from common.schedules import LinearSchedule, make_schedule
from common.wrappers.action_mask import VecActionMasks

if TYPE_CHECKING:
    from common.vec_env.base import VecEnv


@dataclasses.dataclass(frozen=True)
class DQNStep:
    """What ``learn``'s ``callback`` sees after each vec-env step: the model, the env steps before and after
    the step, the epsilon it acted with, and the parameter-noise explorer (None without ``param_noise``)."""

    model: DQNModel
    t_prev: int
    t: int
    eps: float
    explorer: Any


def learn(*, env: VecEnv, network: str | Callable | None = None, total_timesteps: int, seed: int | None = None,
          load_path: str | None = None, callback: Callable[[DQNStep], bool] | None = None, **kwargs) -> DQNModel:
    """Train a deep Q-network on a VecEnv with a Discrete action space.

    Args:
        env: VecEnv to learn from (any number of envs).
        network: registered network name or builder; None -> "cnn" for image observations, else "mlp".
        total_timesteps: env steps in total (over all envs).
        seed: seeds weights, exploration, replay sampling, TF and the env (same seed -> same run).
        load_path: model file to continue training from (weights and optimizer state).
        callback: ``callback(DQNStep)`` after every vec-env step; returning True stops training.
        kwargs: hyperparameters of hyperparams/deepq.toml (named and explained there; missing ones take
            its [defaults]) and the network builder's parameters (e.g. num_layers=2, num_hidden=64).

    Returns:
        the trained DQNModel.
    """
    return train("deepq", DQNModel, env=env, network=network, total_timesteps=total_timesteps, seed=seed,
                 load_path=load_path, callback=callback, **kwargs)


def train(algorithm: str, model_class: type[DQNModel], *, env: VecEnv, network: str | Callable | None = None,
          total_timesteps: int, seed: int | None = None, load_path: str | None = None,
          callback: Callable[[DQNStep], bool] | None = None, **kwargs) -> DQNModel:
    """``learn`` of ``algorithm``: its table ``hyperparams/<algorithm>.toml`` and a model of ``model_class``."""
    nenvs = env.num_envs
    network = network or ("cnn" if ObsEncoder(env.observation_space).is_image else "mlp")
    hp, network_kwargs = hyperparameters.settle(hyperparameters.table(algorithm), kwargs, network)
    blocks = max(total_timesteps - hp.learning_starts, 0) // max(hp.train_freq, 1)
    hp.jit_compile = xla_pays(hp.jit_compile, blocks * hp.gradient_steps)
    hyper = hyperparameters.recorded(hp, seed=seed, num_envs=nenvs)
    _check_settings(algorithm, env, {**hyper, "total_timesteps": total_timesteps})
    run = training.setup(env, seed, lambda: model_class(
        env.observation_space, env.action_space, network=network, network_kwargs=network_kwargs, seed=seed,
        hyperparameters=hyper, **constructor_settings(model_class, hyper)), load_path, hp.save_interval)
    model, enc = run.model, run.model.encoder
    obs = enc(env.reset())
    masks = VecActionMasks.of(env)  # None unless the env gives action masks
    extras = None if masks is None else {"next_masks": ((env.action_space.n,), bool)}
    if hp.n_step > 1:
        extras = {**(extras or {}), "discounts": ((), np.float32)}
    buffer, beta = _replay(hp, enc, extras, total_timesteps)
    nstep = NStepQueues(buffer, hp.n_step, hp.gamma, nenvs) if hp.n_step > 1 else None
    exploration = LinearSchedule(max(int(hp.exploration_fraction * total_timesteps), 1), hp.exploration_final_eps,
                                 hp.exploration_initial_eps)
    act_rng, sample_rng = run.rng.spawn(2)
    trainer = _Trainer(model, buffer, hp.batch_size, hp.gradient_steps, hp.gradient_steps_per_call or hp.gradient_steps,
                       make_schedule(hp.lr), max(total_timesteps, 1), beta, hp.prioritized_replay_eps, sample_rng,
                       hp.prioritized_replay_weights)
    explorer = (ParamNoiseExplorer(model, nenvs, run.rng.spawn(1)[0], hp.param_noise_initial_sigma)
                if hp.param_noise else None)
    s = Values(obs=obs, t=0)  # the loop's own variables
    run.track(loop=s, buffer=buffer, trainer=trainer, act_rng=act_rng,
              **({"explorer": explorer} if explorer is not None else {}),
              **({"masks": masks} if masks is not None else {}),
              **({"nstep": nstep} if nstep is not None else {}))
    if run.resume() is False:  # the envs restarted their episodes
        s.obs = enc(env.reset())
        if nstep is not None:
            nstep.restart()
        if explorer is not None:
            explorer.reset(np.arange(nenvs))
        if masks is not None:
            masks.restart()
    obs, t = s.obs, s.t
    while t < total_timesteps:
        if explorer is not None and t >= hp.learning_starts:
            eps = 0.0  # greedy on each env's perturbed network
            actions = explorer.actions(obs, None if masks is None else masks.current)
        else:
            # uniform actions until learning starts; noisy layers explore by themselves
            eps = 1.0 if t < hp.learning_starts else 0.0 if hp.noisy else exploration.value(t)
            actions = model.act(obs, eps, act_rng, None if masks is None else masks.current)
        raw_obs, rewards, dones, infos = env.step(actions + int(env.action_space.start))
        run.check_observations(raw_obs, t + nenvs)
        run.check_rewards(rewards, t)
        new_obs = enc(raw_obs)
        extra_rows = {}
        if masks is not None:  # the next observations' masks (of the final one where an episode ended)
            masks.update(infos, dones)
            extra_rows["next_masks"] = masks.next_of_step
        next_rows, terminated = terminal_aware_next(new_obs, dones, infos, enc.encode_list)
        if nstep is None:
            buffer.add(obs, actions, rewards, next_rows, terminated, **extra_rows)
        else:
            nstep.add(obs, actions, rewards, next_rows, terminated, dones, **extra_rows)
        obs, t_prev, t = new_obs, t, t + nenvs
        s.obs, s.t = obs, t
        model.num_timesteps += nenvs
        if dones.any():
            if explorer is not None:
                explorer.reset(np.flatnonzero(dones))
            count_before = run.episodes.count
            run.episodes.add(infos, dones)
            run.progress(t)
            if hp.print_freq and run.episodes.count // hp.print_freq > count_before // hp.print_freq:
                _log(run, t, eps, trainer, explorer)
        if (explorer is not None and t >= hp.learning_starts
                and t // hp.param_noise_adaption_interval > t_prev // hp.param_noise_adaption_interval):
            idx = explorer.rng.integers(0, len(buffer), hp.batch_size)
            explorer.adapt(buffer.gather(idx)["obs"], exploration.value(t))
        if t > hp.learning_starts and hp.gradient_steps > 0:
            blocks = t // hp.train_freq - max(t_prev, hp.learning_starts) // hp.train_freq
            if blocks > 0:
                trainer.run(blocks, t)
        if t // hp.target_network_update_freq > t_prev // hp.target_network_update_freq:
            model.update_target()
        run.periodic(t_prev, t)
        if callback is not None and callback(DQNStep(model, t_prev, t, eps, explorer)):
            break
    _log(run, t, 0.0 if explorer is not None or hp.noisy else exploration.value(t), trainer, explorer)
    return run.finish()


def _replay(hp: Any, enc: ObsEncoder, extras: dict | None,
            total_timesteps: int) -> tuple[ReplayBuffer, LinearSchedule | None]:
    """The replay buffer of the run, and the importance-sampling exponent's schedule of prioritized replay."""
    if not hp.prioritized_replay:
        return ReplayBuffer(hp.buffer_size, enc.shape, obs_dtype=enc.dtype, extras=extras), None
    buffer = PrioritizedReplayBuffer(hp.buffer_size, enc.shape, obs_dtype=enc.dtype, extras=extras,
                                     alpha=hp.prioritized_replay_alpha)
    return buffer, LinearSchedule(hp.prioritized_replay_beta_iters or max(total_timesteps, 1), 1.0,
                                  hp.prioritized_replay_beta0)


def _check_settings(algorithm: str, env, hyper: dict) -> None:
    """One-line ConfigErrors for settings deepq (or ``algorithm``, deepq with other defaults) cannot run with."""
    check_action_space(env.action_space)
    if mpi_util.size() > 1:
        raise ConfigError(f"{algorithm} does not support MPI (it runs in one process); run it without mpiexec "
                          "and use --num_env for more envs")
    if hyper["param_noise"] and (hyper["noisy"] or hyper["distributional"] is not None):
        raise ConfigError(f"{algorithm}: param_noise works with the plain Q head only; turn off noisy and "
                          "distributional, or use --param_noise=False")
    if hyper["total_timesteps"] < 0:
        raise ConfigError(f"deepq: total_timesteps must be a positive integer, got {hyper['total_timesteps']}")


def _log(run: training.TrainingRun, t: int, eps: float, trainer: _Trainer, explorer) -> None:
    losses = trainer.losses
    stats = {"td_loss": float(np.mean(losses)) if losses else float("nan"), "n_updates": trainer.n_updates}
    extra = explorer.get_stats() if explorer is not None else {}
    run.log(t, stats, **{"rollout/exploration_eps": eps, **extra})


class _Trainer:
    """Samples blocks of batches from the replay buffer and trains the model on them."""

    def __init__(self, model: DQNModel, buffer: ReplayBuffer, batch_size: int, gradient_steps: int,
                 steps_per_call: int, lr: Callable[[float], float], total_timesteps: int,
                 beta: LinearSchedule | None, prio_eps: float, rng: np.random.Generator,
                 weights_normalise: str = "buffer"):
        self.model, self.buffer, self.batch_size = model, buffer, int(batch_size)
        self.weights_normalise = weights_normalise
        self.gradient_steps, self.steps_per_call = int(gradient_steps), int(steps_per_call)
        self.lr, self.total_timesteps = lr, total_timesteps
        self.beta, self.prio_eps, self.rng = beta, float(prio_eps), rng
        self.losses: deque = deque(maxlen=100)
        self.n_updates = 0

    def state(self) -> dict:
        """For checkpoints: the sampling generator, the update count and recent losses, and whether the
        target network is behind the online one."""
        return {"rng": self.rng.bit_generator.state, "n_updates": self.n_updates, "losses": list(self.losses),
                "target_stale": self.model._target_stale}

    def load_state(self, state: dict) -> None:
        """Restore what ``state`` returned."""
        self.rng.bit_generator.state = state["rng"]
        self.n_updates = int(state["n_updates"])
        self.losses.clear()
        self.losses.extend(float(v) for v in state["losses"])
        self.model._target_stale = bool(state["target_stale"])

    def run(self, blocks: int, t: int) -> None:
        """Train ``blocks`` blocks of ``gradient_steps`` steps each, at the learning rate of env step ``t``."""
        todo, lr = blocks * self.gradient_steps, self.lr(max(1.0 - t / self.total_timesteps, 0.0))
        while todo > 0 and len(self.buffer):  # n-step rows reach the buffer n steps late
            k = min(todo, self.steps_per_call)
            if self.beta is None:
                batch = self.buffer.sample((k, self.batch_size), self.rng)
            else:
                batch = self.buffer.sample((k, self.batch_size), self.rng, beta=self.beta.value(t),
                                           normalise=self.weights_normalise)
            td, loss = self.model.train(batch, lr)
            if self.beta is not None:
                self.buffer.update_priorities(batch["indices"], np.abs(td) + self.prio_eps)
            self.losses.append(loss)
            self.n_updates += k
            todo -= k


load = loader(DQNModel)

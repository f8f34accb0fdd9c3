"""DQN (Mnih et al. 2015) with double Q, dueling heads and prioritized replay, in TensorFlow 2: ``learn``, ``load``.

Runs on a VecEnv with any number of envs and bootstraps through time-limit truncation (the replay buffer
stores ``terminal_observation`` and marks only real terminations as done). Acts uniformly at random until
``learning_starts``, then epsilon-greedily on the schedule, or with ``param_noise=True`` greedily with a
perturbed copy of the Q-network per env (``param_noise.py``). Every step count is in env steps summed over
all envs. Acting runs the numpy mirror of the Q-network (mlp); every ``train_freq`` env steps the
``gradient_steps`` updates run in one ``tf.function`` call on batches sampled in numpy beforehand (with
prioritized replay the priorities are updated after each call).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from algos import training
from algos.base import constructor_settings, loader
from algos.deepq.model import DQNModel, check_action_space
from algos.deepq.param_noise import ParamNoiseExplorer
from common import mpi_util
from common.buffers.prioritized import PrioritizedReplayBuffer
from common.buffers.replay import ReplayBuffer, terminal_aware_next
from common.errors import ConfigError
from common.obs_encoding import ObsEncoder
from common.schedules import LinearSchedule


def learn(
    *,
    env,
    network=None,
    total_timesteps: int,
    seed: int | None = None,
    lr: float = 5e-4,
    buffer_size: int = 50000,
    exploration_fraction: float = 0.1,
    exploration_initial_eps: float = 1.0,
    exploration_final_eps: float = 0.02,
    train_freq: int = 1,
    gradient_steps: int = 1,
    gradient_steps_per_call: int | None = None,
    batch_size: int = 32,
    print_freq: int = 100,
    save_interval: int = 0,
    learning_starts: int = 1000,
    gamma: float = 0.99,
    target_network_update_freq: int = 500,
    prioritized_replay: bool = False,
    prioritized_replay_alpha: float = 0.6,
    prioritized_replay_beta0: float = 0.4,
    prioritized_replay_beta_iters: int | None = None,
    prioritized_replay_eps: float = 1e-6,
    param_noise: bool = False,
    param_noise_adaption_interval: int = 50,
    param_noise_initial_sigma: float = 0.01,
    hiddens: Sequence[int] = (256,),
    dueling: bool = True,
    layer_norm: bool = False,
    double_q: bool = True,
    max_grad_norm: float | None = 10.0,
    callback: Callable[[dict, dict], bool] | None = None,
    load_path: str | None = None,
    **network_kwargs,
) -> DQNModel:
    """Train a deep Q-network on a VecEnv with a Discrete action space.

    Args:
        env: VecEnv to learn from (any number of envs).
        network: registered network name or builder; None -> "cnn" for image observations, else "mlp".
        total_timesteps: env steps in total (over all envs).
        seed: seeds weights, exploration, replay sampling, TF and the env (same seed -> same run).
        lr: Adam learning rate.
        buffer_size: replay buffer capacity in transitions.
        exploration_fraction: fraction of total_timesteps over which epsilon falls to its final value.
        exploration_initial_eps: epsilon at the start.
        exploration_final_eps: final epsilon of the epsilon-greedy exploration.
        train_freq: env steps (all envs) between training blocks.
        gradient_steps: gradient steps per training block.
        gradient_steps_per_call: gradient steps per TF call (None: the whole block in one call).
        batch_size: transitions per gradient step.
        print_freq: episodes between log lines (0: no log lines).
        save_interval: env steps between checkpoints in <log dir>/checkpoints (0: none; baselines:
            checkpoint_freq).
        learning_starts: env steps collected (with uniformly random actions) before training starts.
        gamma: discount factor.
        target_network_update_freq: env steps between target network updates.
        prioritized_replay: use prioritized replay.
        prioritized_replay_alpha: prioritization exponent (0: uniform).
        prioritized_replay_beta0: initial importance-sampling exponent (annealed to 1).
        prioritized_replay_beta_iters: env steps over which beta reaches 1 (None: total_timesteps).
        prioritized_replay_eps: added to |TD error| to make priorities.
        param_noise: adaptive parameter-space noise instead of epsilon-greedy (mlp networks; see param_noise.py).
        param_noise_adaption_interval: env steps (all envs) between adaptations of the noise scale.
        param_noise_initial_sigma: initial stddev of the parameter noise (baselines: 0.01).
        hiddens: sizes of the Q head's hidden layers on top of the network.
        dueling: dueling head (state value + advantages).
        layer_norm: layer normalisation in the Q head.
        double_q: double Q-learning targets.
        max_grad_norm: global gradient-norm clip (None: none; baselines: grad_norm_clipping).
        callback: ``callback(locals(), globals())`` after every env step; returning True stops training.
        load_path: model file to continue training from (weights and optimizer state).
        network_kwargs: passed to the network builder (e.g. num_layers=2, num_hidden=64).

    Returns:
        the trained DQNModel.
    """
    hyper = training.hyperparameters({**locals(), "num_envs": env.num_envs})
    _check_settings(env, {**hyper, "total_timesteps": total_timesteps})
    nenvs = env.num_envs
    network = network or ("cnn" if ObsEncoder(env.observation_space).is_image else "mlp")
    run = training.setup(env, seed, lambda: DQNModel(
        env.observation_space, env.action_space, network=network, network_kwargs=network_kwargs, seed=seed,
        hyperparameters=hyper, **constructor_settings(DQNModel, hyper)), load_path, save_interval)
    model, enc = run.model, run.model.encoder
    if prioritized_replay:
        buffer = PrioritizedReplayBuffer(buffer_size, enc.shape, obs_dtype=enc.dtype, alpha=prioritized_replay_alpha)
        beta = LinearSchedule(prioritized_replay_beta_iters or max(total_timesteps, 1), 1.0, prioritized_replay_beta0)
    else:
        buffer, beta = ReplayBuffer(buffer_size, enc.shape, obs_dtype=enc.dtype), None
    exploration = LinearSchedule(max(int(exploration_fraction * total_timesteps), 1), exploration_final_eps,
                                 exploration_initial_eps)
    act_rng, sample_rng = run.rng.spawn(2)
    trainer = _Trainer(model, buffer, batch_size, gradient_steps, gradient_steps_per_call or gradient_steps,
                       lr, beta, prioritized_replay_eps, sample_rng)
    explorer = ParamNoiseExplorer(model, nenvs, run.rng.spawn(1)[0], param_noise_initial_sigma) if param_noise else None
    obs = enc(env.reset())
    t = 0
    while t < total_timesteps:
        if explorer is not None and t >= learning_starts:
            eps, actions = 0.0, explorer.actions(obs)  # greedy on each env's perturbed network
        else:
            eps = 1.0 if t < learning_starts else exploration.value(t)  # uniform actions until learning starts
            actions = model.act(obs, eps, act_rng)
        raw_obs, rewards, dones, infos = env.step(actions + int(env.action_space.start))
        new_obs = enc(raw_obs)
        buffer.add(obs, actions, rewards, *terminal_aware_next(new_obs, dones, infos, enc.encode_list))
        obs, t_prev, t = new_obs, t, t + nenvs
        model.num_timesteps += nenvs
        if dones.any():
            if explorer is not None:
                explorer.reset(np.flatnonzero(dones))
            count_before = run.episodes.count
            run.episodes.add(infos, dones)
            run.progress(t)
            if print_freq and run.episodes.count // print_freq > count_before // print_freq:
                _log(run, t, eps, trainer, explorer)
        if (explorer is not None and t >= learning_starts
                and t // param_noise_adaption_interval > t_prev // param_noise_adaption_interval):
            idx = explorer.rng.integers(0, len(buffer), batch_size)
            explorer.adapt(buffer.gather(idx)["obs"], exploration.value(t))
        if t > learning_starts and gradient_steps > 0:
            blocks = t // train_freq - max(t_prev, learning_starts) // train_freq
            if blocks > 0:
                trainer.run(blocks, t)
        if t // target_network_update_freq > t_prev // target_network_update_freq:
            model.update_target()
        run.checkpoint(t_prev, t)
        if callback is not None and callback(locals(), globals()):
            break
    _log(run, t, 0.0 if explorer is not None else exploration.value(t), trainer, explorer)
    model.episodes = run.episodes
    return model


def _check_settings(env, hyper: dict) -> None:
    """One-line ConfigErrors for settings deepq cannot run with."""
    check_action_space(env.action_space)
    if mpi_util.size() > 1:
        raise ConfigError("deepq does not support MPI (it runs in one process); run it without mpiexec "
                          "and use --num_env for more envs")
    if hyper["param_noise"] and hyper["param_noise_adaption_interval"] < 1:
        raise ConfigError(f"deepq: param_noise_adaption_interval must be a positive integer, "
                          f"got {hyper['param_noise_adaption_interval']}")
    for name in ("total_timesteps", "buffer_size", "train_freq", "batch_size"):
        value = hyper.get(name, 1)
        if value < 1 and not (name == "total_timesteps" and value == 0):
            raise ConfigError(f"deepq: {name} must be a positive integer, got {value}")
    if hyper["gradient_steps"] < 0:
        raise ConfigError(f"deepq: gradient_steps must be >= 0, got {hyper['gradient_steps']}")
    steps_per_call = hyper["gradient_steps_per_call"]
    if steps_per_call is not None and steps_per_call < 1:
        raise ConfigError(f"deepq: gradient_steps_per_call must be positive, got {steps_per_call}")


def _log(run: training.TrainingRun, t: int, eps: float, trainer: _Trainer, explorer) -> None:
    losses = trainer.losses
    stats = {"td_loss": float(np.mean(losses)) if losses else float("nan"), "n_updates": trainer.n_updates}
    extra = explorer.get_stats() if explorer is not None else {}
    run.log(t, stats, **{"rollout/exploration_eps": eps, **extra})


class _Trainer:
    """Samples blocks of batches from the replay buffer and trains the model on them."""

    def __init__(self, model: DQNModel, buffer: ReplayBuffer, batch_size: int, gradient_steps: int,
                 steps_per_call: int, lr: float, beta: LinearSchedule | None, prio_eps: float,
                 rng: np.random.Generator):
        self.model, self.buffer, self.batch_size = model, buffer, int(batch_size)
        self.gradient_steps, self.steps_per_call = int(gradient_steps), int(steps_per_call)
        self.lr, self.beta, self.prio_eps, self.rng = float(lr), beta, float(prio_eps), rng
        self.losses: deque = deque(maxlen=100)
        self.n_updates = 0

    def run(self, blocks: int, t: int) -> None:
        """Train ``blocks`` blocks of ``gradient_steps`` steps each."""
        todo = blocks * self.gradient_steps
        while todo > 0:
            k = min(todo, self.steps_per_call)
            if self.beta is None:
                batch = self.buffer.sample((k, self.batch_size), self.rng)
            else:
                batch = self.buffer.sample((k, self.batch_size), self.rng, beta=self.beta.value(t))
            td, loss = self.model.train(batch, self.lr)
            if self.beta is not None:
                self.buffer.update_priorities(batch["indices"], np.abs(td) + self.prio_eps)
            self.losses.append(loss)
            self.n_updates += k
            todo -= k


load = loader(DQNModel)

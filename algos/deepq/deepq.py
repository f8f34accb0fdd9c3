"""DQN (Mnih et al. 2015) with double Q, dueling heads and prioritized replay, in TensorFlow 2: ``learn``, ``load``.

Unlike baselines it runs on a VecEnv with any number of envs and bootstraps through time-limit truncation
(the replay buffer stores ``terminal_observation`` and marks only real terminations as done). Like
stable-baselines3 it acts uniformly at random until ``learning_starts`` (epsilon 1, whatever the schedule
says), then epsilon-greedily on the schedule: on CartPole-v1 (bench/train.py) the greedy policy was at 500
at 19 of 45 checkpoints over steps 30k-50k of seeds 0-4, against 10 of 45 with the schedule's epsilon
(0.88 to 0.85) there. With ``param_noise=True`` (baselines' adaptive parameter-space noise, see
``param_noise.py``) each env acts greedily (epsilon 0) with its own perturbed copy of the Q-network after
``learning_starts``; the noise scale adapts every ``param_noise_adaption_interval`` env steps on a replay batch
(baselines adapts at every act call: one extra forward pass per step for a scale that moves 1% at a time).
Every step
count below (``learning_starts``, ``train_freq``, ``target_network_update_freq``, ``checkpoint_freq``, the
schedules) is in env steps summed over all envs.

Speed design: acting runs the numpy mirror of the Q-network (mlp); every ``train_freq`` env steps the
``gradient_steps`` updates run in one ``tf.function`` call on batches sampled in numpy beforehand. With
prioritized replay the priorities are updated after each call, so within one call they are stale (set
``gradient_steps_per_call=1`` for exact per-step priorities, at one TF call per gradient step). Measured on
CartPole-v1, 50k steps, 128 gradient steps per block, 2 busy cores: one call per block 23-27 s, one call per
step 84 s; both solved the seed tried, so blocks are the default. XLA (``jit_compile=True`` on the block)
measured on the bench's CartPole run, seeds 0-4, quiet machine: median 12.3 s against 15.0 s, with the same
learning quality (greedy at 500 on 20/45 late checkpoints against 19/45) but other float rounding, hence
other per-seed outcomes; left off for now (compile per shape untested on conv nets and split blocks).
"""
from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from algos.deepq.model import ALGORITHM, DQNModel, check_action_space
from algos.deepq.param_noise import ParamNoiseExplorer
from common import logger, mpi_util, progress
from common.errors import ConfigError
from common.policies import ObsEncoder
from common.prioritized_replay import PrioritizedReplayBuffer
from common.replay_buffer import ReplayBuffer
from common.schedules import LinearSchedule
from common.serialization import (
    ModelFileError,
    check_backed_sizes,
    metadata_field,
    read_model_file,
    restore_model,
    space_from_json,
    trusted_network,
)
from common.tf_util import configure_threads, seed_everything
from common.vec_env import unwrap_vec_normalize


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
    checkpoint_freq: int | None = 10000,
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
    grad_norm_clipping: float | None = 10.0,
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
        checkpoint_freq: env steps between checkpoints in <log dir>/checkpoints (None or 0: none).
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
        grad_norm_clipping: global gradient-norm clip (None: none).
        callback: ``callback(locals(), globals())`` after every env step; returning True stops training.
        load_path: model file to continue training from (weights and optimizer state).
        network_kwargs: passed to the network builder (e.g. num_layers=2, num_hidden=64).

    Returns:
        the trained DQNModel (its best-mean-return checkpoint, if any, is <log dir>/checkpoints/best.zip).
    """
    check_action_space(env.action_space)
    if mpi_util.size() > 1:
        raise ConfigError("deepq does not support MPI (it runs in one process); run it without mpiexec "
                         "and use --num_env for more envs")
    if param_noise and param_noise_adaption_interval < 1:
        raise ConfigError(f"deepq: param_noise_adaption_interval must be a positive integer, "
                          f"got {param_noise_adaption_interval}")
    for name, value in (("total_timesteps", total_timesteps), ("buffer_size", buffer_size),
                        ("train_freq", train_freq), ("batch_size", batch_size)):
        if value < 1 and not (name == "total_timesteps" and value == 0):
            raise ConfigError(f"deepq: {name} must be a positive integer, got {value}")
    if gradient_steps < 0:
        raise ConfigError(f"deepq: gradient_steps must be >= 0, got {gradient_steps}")
    configure_threads()
    seed_everything(seed)
    nenvs = env.num_envs
    if network is None:
        network = "cnn" if ObsEncoder(env.observation_space).is_image else "mlp"
    hyper = {"lr": lr, "buffer_size": buffer_size, "exploration_fraction": exploration_fraction,
             "exploration_initial_eps": exploration_initial_eps, "exploration_final_eps": exploration_final_eps,
             "train_freq": train_freq, "gradient_steps": gradient_steps, "batch_size": batch_size,
             "learning_starts": learning_starts, "gamma": gamma,
             "target_network_update_freq": target_network_update_freq, "prioritized_replay": prioritized_replay,
             "prioritized_replay_alpha": prioritized_replay_alpha, "prioritized_replay_beta0": prioritized_replay_beta0,
             "prioritized_replay_beta_iters": prioritized_replay_beta_iters,
             "prioritized_replay_eps": prioritized_replay_eps, "param_noise": bool(param_noise),
             "seed": seed, "num_envs": nenvs}
    model = DQNModel(env.observation_space, env.action_space, network=network, network_kwargs=network_kwargs,
                     hiddens=hiddens, dueling=dueling, layer_norm=layer_norm, double_q=double_q, gamma=gamma,
                     grad_norm_clipping=grad_norm_clipping, seed=seed, hyperparameters=hyper,
                     eps=exploration_final_eps)
    model.vec_normalize = unwrap_vec_normalize(env)
    if load_path is not None:
        restore_model(model, read_model_file(load_path, ALGORITHM, env), env, training=True)
    progress.report_model(model)

    enc = model.encoder
    if prioritized_replay:
        buffer = PrioritizedReplayBuffer(buffer_size, enc.shape, obs_dtype=enc.dtype, alpha=prioritized_replay_alpha)
        beta = LinearSchedule(prioritized_replay_beta_iters or max(total_timesteps, 1), 1.0, prioritized_replay_beta0)
    else:
        buffer, beta = ReplayBuffer(buffer_size, enc.shape, obs_dtype=enc.dtype), None
    exploration = LinearSchedule(max(int(exploration_fraction * total_timesteps), 1), exploration_final_eps,
                                 exploration_initial_eps)
    rng = np.random.default_rng(seed)
    act_rng, sample_rng = rng.spawn(2)
    trainer = _Trainer(model, buffer, batch_size, gradient_steps, gradient_steps_per_call or gradient_steps,
                       lr, beta, prioritized_replay_eps, sample_rng)
    explorer = ParamNoiseExplorer(model, nenvs, rng.spawn(1)[0], param_noise_initial_sigma) if param_noise else None
    stats = _Stats(print_freq, explorer.get_stats if explorer is not None else None)
    ckpt = _Checkpointer(checkpoint_freq, logger.get_dir())
    if seed is not None:
        env.seed(seed)
    obs = enc(env.reset())
    bar = progress.get_progress()
    t = 0
    while t < total_timesteps:
        if explorer is not None and t >= learning_starts:
            eps, actions = 0.0, explorer.actions(obs)  # greedy on each env's perturbed network
        else:
            eps = 1.0 if t < learning_starts else exploration.value(t)  # uniform actions until learning starts
            actions = model.act(obs, eps, act_rng)
        raw_obs, rewards, dones, infos = env.step(actions + int(env.action_space.start))
        new_obs = enc(raw_obs)
        buffer.add(obs, actions, rewards, *_replay_next(enc, new_obs, dones, infos))
        obs, t_prev, t = new_obs, t, t + nenvs
        model.num_timesteps += nenvs
        if dones.any():
            if explorer is not None:
                explorer.reset(np.flatnonzero(dones))
            stats.episodes(infos, dones, t, eps, trainer)
            bar.update(t, stats.mean_return())
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
        if ckpt.due(t_prev, t, learning_starts):
            ckpt.save(model, stats)
        if callback is not None and callback(locals(), globals()):
            break
    stats.dump(t, 0.0 if explorer is not None else exploration.value(t), trainer)
    return model


def _replay_next(enc: ObsEncoder, new_obs: np.ndarray, dones: np.ndarray, infos: list[dict]):
    """(next_obs, terminated) for the replay buffer: terminal observations of finished episodes, and
    done only where the episode really terminated (not truncated by a time limit)."""
    terminated = np.zeros(len(dones), np.float32)
    done_idx = np.flatnonzero(dones)
    if done_idx.size == 0:
        return new_obs, terminated
    next_obs = new_obs.copy()
    with_terminal = [i for i in done_idx if "terminal_observation" in infos[i]]
    if with_terminal:
        next_obs[with_terminal] = enc.encode_list([infos[i]["terminal_observation"] for i in with_terminal])
    for i in done_idx:
        terminated[i] = 0.0 if infos[i].get("TimeLimit.truncated", False) else 1.0
    return next_obs, terminated


class _Trainer:
    """Samples blocks of batches from the replay buffer and trains the model on them."""

    def __init__(self, model: DQNModel, buffer: ReplayBuffer, batch_size: int, gradient_steps: int,
                 steps_per_call: int, lr: float, beta: LinearSchedule | None, prio_eps: float,
                 rng: np.random.Generator):
        if steps_per_call < 1:
            raise ConfigError(f"deepq: gradient_steps_per_call must be positive, got {steps_per_call}")
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


class _Stats:
    """Episode returns and the baselines-style log line every ``print_freq`` episodes."""

    def __init__(self, print_freq: int, extra: Callable[[], dict] | None = None):
        self.print_freq = int(print_freq)
        self.extra = extra  # more values to log (parameter noise statistics)
        self.returns: deque = deque(maxlen=100)
        self.lengths: deque = deque(maxlen=100)
        self.num_episodes = 0
        self.tstart = time.perf_counter()
        self.history: list[tuple[int, float, float]] = []  # (timesteps, seconds, return) per episode

    def mean_return(self) -> float:
        """Mean return of the last 100 episodes (nan before the first)."""
        return float(np.mean(self.returns)) if self.returns else float("nan")

    def episodes(self, infos: list[dict], dones: np.ndarray, t: int, eps: float, trainer: _Trainer) -> None:
        """Record the episodes that finished this step; log every ``print_freq`` episodes."""
        elapsed = time.perf_counter() - self.tstart
        for i in np.flatnonzero(dones):
            ep = infos[i].get("episode")
            if ep is None:
                continue
            self.returns.append(float(ep["r"]))
            self.lengths.append(int(ep["l"]))
            self.history.append((t, elapsed, float(ep["r"])))
            self.num_episodes += 1
            if self.print_freq and self.num_episodes % self.print_freq == 0:
                self.dump(t, eps, trainer)

    def dump(self, t: int, eps: float, trainer: _Trainer) -> None:
        """Write one log line."""
        elapsed = time.perf_counter() - self.tstart
        logger.logkv("total_timesteps", t)
        logger.logkv("episodes", self.num_episodes)
        logger.logkv("eprewmean", self.mean_return())
        logger.logkv("eplenmean", float(np.mean(self.lengths)) if self.lengths else float("nan"))
        logger.logkv("exploration_eps", eps)
        logger.logkv("loss/td_loss", float(np.mean(trainer.losses)) if trainer.losses else float("nan"))
        logger.logkv("n_updates", trainer.n_updates)
        logger.logkv("fps", int(t / elapsed) if elapsed > 0 else 0)
        logger.logkv("time_elapsed", elapsed)
        for k, v in (self.extra() if self.extra is not None else {}).items():
            logger.logkv(k, v)
        logger.dumpkvs()


class _Checkpointer:
    """Every ``freq`` env steps: <dir>/checkpoints/latest.zip, and best.zip when the mean return improved."""

    MIN_EPISODES = 10

    def __init__(self, freq: int | None, log_dir: str | None):
        self.freq = int(freq or 0)
        self.folder = os.path.join(log_dir, "checkpoints") if log_dir else None
        self.best = -math.inf

    def due(self, t_prev: int, t: int, learning_starts: int) -> bool:
        """Whether a checkpoint boundary was crossed after learning started."""
        return bool(self.freq and self.folder and t > learning_starts and t // self.freq > t_prev // self.freq)

    def save(self, model: DQNModel, stats: _Stats) -> None:
        """Write latest.zip, and best.zip when the mean return of the last 100 episodes is a new best."""
        model.save(os.path.join(self.folder, "latest.zip"))
        mean = stats.mean_return()
        if len(stats.returns) >= self.MIN_EPISODES and mean > self.best:
            logger.log(f"deepq: saving best model (mean return {mean:.2f} over the last {len(stats.returns)} "
                       f"episodes, was {self.best:.2f})")
            self.best = mean
            model.save(os.path.join(self.folder, "best.zip"))


def load(path: str, env=None, network=None) -> DQNModel:
    """Load a deepq model file. With ``env``: checks its spaces against the model's (ModelFileError on a
    mismatch) and restores saved VecNormalize statistics into ``env``'s VecNormalize with ``training=False``.
    ``network``: the user's own network when the file names one outside this project's registry."""
    opened = read_model_file(path, ALGORITHM, env)
    metadata = opened.metadata
    head = metadata_field(opened, "head", dict, {})
    hiddens = head.get("hiddens", (256,))
    if not isinstance(hiddens, (list, tuple)) or not all(type(h) is int and h > 0 for h in hiddens):
        raise ModelFileError(f"{path!r}: the Q head's hiddens {hiddens!r} are not a list of positive sizes")
    check_backed_sizes(hiddens, opened, "head.hiddens")
    model = DQNModel(space_from_json(metadata["observation_space"]), space_from_json(metadata["action_space"]),
                     network=trusted_network(opened, network), network_kwargs=metadata["network_kwargs"],
                     hiddens=hiddens, dueling=bool(head.get("dueling", True)),
                     layer_norm=bool(head.get("layer_norm", False)),
                     double_q=bool(metadata_field(opened, "double_q", bool, True)),
                     gamma=metadata_field(opened, "gamma", float, 0.99),
                     grad_norm_clipping=metadata_field(opened, "grad_norm_clipping", (float, type(None)), 10.0),
                     seed=0, hyperparameters=metadata_field(opened, "hyperparameters", dict, {}),
                     eps=metadata_field(opened, "eps", float, 0.0))
    restore_model(model, opened, env, training=False)
    return model

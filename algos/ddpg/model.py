"""DDPG model: actor, critic, their targets, the fused training block, numpy acting and saving.

Speed design: acting runs through the actor's numpy mirror (no TF call per env step); training runs
``nb_train_steps`` gradient steps (critic, actor, soft target updates) in ONE ``tf.function`` call on
pre-sampled batches of shape ``(nb_train_steps, batch_size, ...)``.
"""
from __future__ import annotations

import copy

import numpy as np
import tensorflow as tf

from algos.base import Model
from common import mpi_util
from common.errors import ConfigError
from common.layers import Dense
from common.model_file import ModelFileError
from common.models import build_network
from common.obs_encoding import ObsEncoder
from common.policy_export import PolicyGraph
from common.running_mean_std import RunningMeanStd
from common.tf_util import (
    Adam,
    clip_by_global_norm,
    flatten_grads,
    module_variables,
    unflatten_grads,
)

ALGORITHM = "ddpg"
OBS_CLIP = 5.0
STAT_NAMES = ("critic_loss", "actor_loss", "q_mean", "target_q_mean")


class _Net(tf.Module):
    """A body network from the registry followed by a linear head initialised in +-3e-3 (as baselines)."""

    def __init__(self, name: str, in_dim: int, out_dim: int, network, seed, network_kwargs: dict):
        super().__init__(name=name)
        self.body = build_network(network, (in_dim,), seed=seed, **network_kwargs)
        if getattr(self.body, "recurrent", False):
            raise ConfigError(f"ddpg needs a feed-forward network, {network!r} is recurrent")
        rng = np.random.default_rng(None if seed is None else seed + 7919)
        self.head = Dense(self.body.output_dim, out_dim, 1.0, name="head")
        self.head.w.assign(rng.uniform(-3e-3, 3e-3, (self.body.output_dim, out_dim)).astype(np.float32))
        self.head.b.assign(rng.uniform(-3e-3, 3e-3, out_dim).astype(np.float32))
        self.numpy_mirror = bool(getattr(self.body, "has_numpy_mirror", False))

    def __call__(self, x):
        return self.head(self.body(x))

    def kernels(self) -> list[tf.Variable]:
        """The body's weight matrices (what critic_l2_reg penalises)."""
        return [v for v in self.body.trainable_variables if len(v.shape) >= 2]

    def numpy_params(self) -> list[np.ndarray]:
        """Body params then head w, b (numpy)."""
        return self.body.numpy_params() + [self.head.w.numpy(), self.head.b.numpy()]

    def perturbable(self) -> np.ndarray:
        """Mask over ``numpy_params``: False for layer-norm gains/offsets (parameter noise leaves them)."""
        params = self.numpy_params()
        mask = np.ones(len(params), bool)
        if getattr(self.body, "layer_norm", False):
            for i in range(len(self.body.layers)):
                mask[4 * i + 2: 4 * i + 4] = False
        return mask

    def numpy_forward(self, x: np.ndarray, params: list[np.ndarray]) -> np.ndarray:
        """Forward pass in numpy with ``params`` as returned by ``numpy_params``."""
        h = self.body.numpy_forward(x, params[:-2])
        return h @ params[-2] + params[-1]


def _global_moments(x: np.ndarray) -> np.ndarray:
    """[mean, variance, count] of x over the data of all MPI ranks, as float32."""
    mean, std, count = mpi_util.mpi_moments(x, axis=0)
    return np.array([mean, np.square(std), count], np.float32)


class DDPGModel(Model):
    """Actor-critic pair with target networks and optimizers.

    Args:
        observation_space, action_space: the env's spaces (action space: bounded Box).
        network, network_kwargs: body of the actor and of the critic (the critic sees [obs, action]).
        seed: weight initialisation seed.
        gamma, tau: discount and soft target-update rate.
        actor_lr, critic_lr: Adam learning rates.
        critic_l2_reg: L2 penalty on the critic body's weight matrices.
        max_grad_norm: global-norm clip of the actor gradients (None or 0: none).
        reward_scale: rewards are multiplied by this before learning.
        normalize_observations: normalise inputs with running mean/std (saved with the model).
        normalize_returns, popart: normalise the critic's targets (and preserve outputs, Pop-Art).
        hyperparameters: recorded in saved files.
    """

    algorithm = ALGORITHM

    def __init__(self, observation_space, action_space, *, network="mlp", network_kwargs=None, seed=None,
                 gamma=0.99, tau=0.01, actor_lr=1e-4, critic_lr=1e-3, critic_l2_reg=0.0, max_grad_norm=None,
                 reward_scale=1.0, normalize_observations=True, normalize_returns=False, popart=False,
                 hyperparameters=None):
        self.observation_space, self.action_space = observation_space, action_space
        self.encoder = ObsEncoder(observation_space)
        if self.encoder.is_image:
            raise ConfigError("ddpg supports flat (non-image) observations only")
        self.obs_dim = int(np.prod(self.encoder.shape))
        self.act_dim = int(np.prod(action_space.shape))
        self.low = np.asarray(action_space.low, np.float64).reshape(-1)
        self.high = np.asarray(action_space.high, np.float64).reshape(-1)
        self.network, self.network_kwargs = network, dict(network_kwargs or {})
        self.hyperparameters = dict(hyperparameters or {})
        self.gamma, self.tau, self.reward_scale = float(gamma), float(tau), float(reward_scale)
        self.critic_l2_reg, self.max_grad_norm = float(critic_l2_reg), max_grad_norm
        self.normalize_observations = bool(normalize_observations)
        self.normalize_returns, self.popart = bool(normalize_returns), bool(popart)
        s = None if seed is None else int(seed)

        def net(name, in_dim, out_dim, offset):
            return _Net(name, in_dim, out_dim, network, None if s is None else s + offset, self.network_kwargs)

        self.actor = net("actor", self.obs_dim, self.act_dim, 0)
        self.critic = net("critic", self.obs_dim + self.act_dim, 1, 1)
        self.target_actor = copy.deepcopy(self.actor)  # new variables, same values (no second init)
        self.target_critic = copy.deepcopy(self.critic)
        self.actor_vars = list(self.actor.trainable_variables)
        self.critic_vars = list(self.critic.trainable_variables)
        self.critic_kernels = self.critic.kernels()
        self.actor_opt = Adam(self.actor_vars, epsilon=1e-8)
        self.critic_opt = Adam(self.critic_vars, epsilon=1e-8)
        self.actor_lr = tf.Variable(float(actor_lr), trainable=False, dtype=tf.float32)
        self.critic_lr = tf.Variable(float(critic_lr), trainable=False, dtype=tf.float32)
        self.obs_rms = RunningMeanStd(shape=(self.obs_dim,))
        self.obs_mean = tf.Variable(np.zeros(self.obs_dim, np.float32), trainable=False)
        self.obs_std = tf.Variable(np.ones(self.obs_dim, np.float32), trainable=False)
        self.ret_mean = tf.Variable(0.0, trainable=False)
        self.ret_var = tf.Variable(1.0, trainable=False)
        self.ret_count = tf.Variable(1e-4, trainable=False)
        self.use_mpi = mpi_util.size() > 1
        self.train_time = 0.0  # seconds spent in the fused updates
        self._np_actor: list[np.ndarray] = []
        self._np_obs = (np.zeros(self.obs_dim, np.float32), np.ones(self.obs_dim, np.float32))
        spec = [tf.TensorSpec([None, None, self.obs_dim], tf.float32), tf.TensorSpec([None, None, self.act_dim], tf.float32),
                tf.TensorSpec([None, None], tf.float32), tf.TensorSpec([None, None, self.obs_dim], tf.float32),
                tf.TensorSpec([None, None], tf.float32)]
        self._train = tf.function(self._train_graph, input_signature=spec)
        self._tf_act = tf.function(lambda x: tf.tanh(self.actor(self._norm_obs(x))),
                                   input_signature=[tf.TensorSpec([None, self.obs_dim], tf.float32)])
        self.sync()

    # ------------------------------------------------------------------ normalisation

    def _norm_obs(self, x):
        if not self.normalize_observations:
            return x
        return tf.clip_by_value((x - self.obs_mean) / self.obs_std, -OBS_CLIP, OBS_CLIP)

    def _ret_std(self):
        return tf.sqrt(tf.maximum(self.ret_var, 1e-4))

    def _denorm_ret(self, q):
        return q * self._ret_std() + self.ret_mean if self.normalize_returns else q

    def _update_ret_stats(self, target):
        """Merge a batch of targets into the return statistics; Pop-Art keeps the critics' outputs."""
        old_mean, old_std = self.ret_mean.read_value(), self._ret_std()
        if self.use_mpi:  # moments of all ranks' targets, so every rank keeps the same statistics
            moments = tf.numpy_function(_global_moments, [target], tf.float32)
            b_mean, b_var, b_count = moments[0], moments[1], moments[2]
        else:
            b_mean, b_var = tf.nn.moments(target, axes=[0])
            b_count = tf.cast(tf.size(target), tf.float32)
        total = self.ret_count + b_count
        delta = b_mean - self.ret_mean
        m2 = self.ret_var * self.ret_count + b_var * b_count + tf.square(delta) * self.ret_count * b_count / total
        self.ret_mean.assign_add(delta * b_count / total)
        self.ret_var.assign(m2 / total)
        self.ret_count.assign(total)
        if self.popart:
            new_mean, new_std = self.ret_mean.read_value(), self._ret_std()
            for net in (self.critic, self.target_critic):
                net.head.w.assign(net.head.w * old_std / new_std)
                net.head.b.assign((net.head.b * old_std + old_mean - new_mean) / new_std)

    def update_obs_stats(self, x: np.ndarray) -> None:
        """Merge a batch of encoded observations into the normalisation statistics (numpy side)."""
        if self.normalize_observations:
            self.obs_rms.update(x)

    # ------------------------------------------------------------------ training

    def _allreduce(self, grads, variables):
        """Seam for MPI data parallelism: average the flat gradient across ranks (no-op for one process)."""
        if not self.use_mpi:
            return grads
        flat = tf.numpy_function(lambda g: mpi_util.allreduce_mean(g).astype(np.float32),
                                 [flatten_grads(grads, variables)], tf.float32)
        return unflatten_grads(flat, variables)

    # AutoGraph rewrites only the loop that calls this: converting these losses, the networks and the optimizer
    # (Python control flow on Python values only) was ~80% of the first call's tracing time, same graph.
    @tf.autograph.experimental.do_not_convert
    def _train_step(self, obs, actions, rewards, next_obs, dones):
        o, o2 = self._norm_obs(obs), self._norm_obs(next_obs)
        q_next = self._denorm_ret(self.target_critic(tf.concat([o2, tf.tanh(self.target_actor(o2))], -1))[:, 0])
        target = rewards * self.reward_scale + self.gamma * (1.0 - dones) * q_next
        if self.normalize_returns:
            self._update_ret_stats(target)
            target_n = (target - self.ret_mean) / self._ret_std()
        else:
            target_n = target
        with tf.GradientTape() as tape:
            q = self.critic(tf.concat([o, actions], -1))[:, 0]
            critic_loss = tf.reduce_mean(tf.square(q - target_n))
            if self.critic_l2_reg > 0:
                critic_loss += self.critic_l2_reg * tf.add_n([tf.nn.l2_loss(w) for w in self.critic_kernels])
        cgrads = self._allreduce(tape.gradient(critic_loss, self.critic_vars), self.critic_vars)
        self.critic_opt.apply(cgrads, self.critic_lr)
        with tf.GradientTape() as tape:
            q_pi = self._denorm_ret(self.critic(tf.concat([o, tf.tanh(self.actor(o))], -1))[:, 0])
            actor_loss = -tf.reduce_mean(q_pi)
        agrads = self._allreduce(tape.gradient(actor_loss, self.actor_vars), self.actor_vars)
        self.actor_opt.apply(clip_by_global_norm(agrads, self.max_grad_norm), self.actor_lr)
        for src, dst in ((self.actor, self.target_actor), (self.critic, self.target_critic)):
            for a, b in zip(src.trainable_variables, dst.trainable_variables):
                b.assign(b + self.tau * (a - b))
        return tf.stack([critic_loss, actor_loss, tf.reduce_mean(self._denorm_ret(q)), tf.reduce_mean(target)])

    def _train_graph(self, obs, actions, rewards, next_obs, dones):
        n = tf.shape(obs)[0]
        stats = tf.zeros([len(STAT_NAMES)])
        for i in tf.range(n):
            stats += self._train_step(obs[i], actions[i], rewards[i], next_obs[i], dones[i])
        return stats / tf.cast(n, tf.float32)

    def train(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        """Gradient steps on pre-sampled batches (arrays of shape ``(steps, batch_size, ...)``) in one
        TF call; then the numpy actor is refreshed. Returns the mean losses.

        Under MPI this is a collective: observation statistics are merged across ranks first."""
        if self.normalize_observations:
            mpi_util.combine_running_mean_std(self.obs_rms)
        self.push_obs_stats()
        out = self._train(batch["obs"], batch["actions"], batch["rewards"], batch["next_obs"], batch["dones"])
        self.sync()
        return dict(zip(STAT_NAMES, out.numpy().tolist()))

    def push_obs_stats(self) -> None:
        """Copy the numpy observation statistics into the TF graph's variables."""
        if self.normalize_observations:
            self.obs_mean.assign(self.obs_rms.mean.astype(np.float32))
            self.obs_std.assign(np.sqrt(self.obs_rms.var + 1e-8).astype(np.float32))

    # ------------------------------------------------------------------ acting

    def sync(self) -> None:
        """Refresh the numpy copies of the actor weights and of the observation statistics."""
        if self.actor.numpy_mirror:
            self._np_actor = self.actor.numpy_params()
        self._np_obs = (self.obs_mean.numpy(), self.obs_std.numpy())

    def normalize(self, x: np.ndarray) -> np.ndarray:
        """Normalise encoded observations as the networks see them (numpy)."""
        if not self.normalize_observations:
            return x
        return np.clip((x - self._np_obs[0]) / self._np_obs[1], -OBS_CLIP, OBS_CLIP)

    def act_unit(self, x: np.ndarray, params: list[np.ndarray] | None = None) -> np.ndarray:
        """Deterministic actions in [-1, 1] for encoded observations ``x`` (numpy when possible)."""
        if self.actor.numpy_mirror:
            p = self._np_actor if params is None else params
            return np.tanh(self.actor.numpy_forward(self.normalize(x), p)).astype(np.float32)
        return self._tf_act(np.asarray(x, np.float32)).numpy()

    def scale_actions(self, unit: np.ndarray) -> np.ndarray:
        """Map actions from [-1, 1] to the env's Box bounds (per dimension, asymmetric bounds too)."""
        a = self.low + (np.asarray(unit, np.float64) + 1.0) * 0.5 * (self.high - self.low)
        return a.reshape((len(unit), *self.action_space.shape)).astype(self.action_space.dtype)

    def unscale_actions(self, actions: np.ndarray) -> np.ndarray:
        """The inverse of ``scale_actions``: env actions to [-1, 1] (flat)."""
        a = np.asarray(actions, np.float64).reshape(len(actions), -1)
        return (2.0 * (a - self.low) / (self.high - self.low) - 1.0).astype(np.float32)

    def initial_state(self, batch_size: int) -> None:
        """DDPG is not recurrent: None."""
        return

    def predict(self, obs, state=None, episode_start=None, deterministic=True):
        """Env actions for a batch of raw observations: ``(actions, None)``. DDPG's policy is
        deterministic; exploration noise is added by ``learn`` only."""
        return self.scale_actions(self.act_unit(self.encoder(obs))), None

    def q_value(self, obs, actions) -> np.ndarray:
        """Critic estimates for raw observations and env actions (one TF call)."""
        x = self._norm_obs(tf.constant(self.encoder(obs), tf.float32))
        a = tf.constant(self.unscale_actions(actions))
        return self._denorm_ret(self.critic(tf.concat([x, a], -1))[:, 0]).numpy()

    # ------------------------------------------------------------------ saving

    def _modules(self) -> dict[str, tf.Module]:
        return {"actor": self.actor, "critic": self.critic, "target_actor": self.target_actor,
                "target_critic": self.target_critic}

    def get_arrays(self) -> dict[str, np.ndarray]:
        """Weights, optimizer states and normalisation statistics as named arrays."""
        arrays = {f"{m}/{k}": v.numpy() for m, mod in self._modules().items()
                  for k, v in module_variables(mod).items()}
        for name, opt in (("actor_adam", self.actor_opt), ("critic_adam", self.critic_opt)):
            arrays.update({f"{name}/{k}": v for k, v in opt.state_arrays().items()})
        arrays["obs_rms/mean"] = self.obs_rms.mean
        arrays["obs_rms/var"] = self.obs_rms.var
        arrays["obs_rms/count"] = np.asarray(self.obs_rms.count, np.float64)
        arrays["ret_rms"] = np.array([self.ret_mean.numpy(), self.ret_var.numpy(), self.ret_count.numpy()], np.float64)
        return arrays

    def set_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore what ``get_arrays`` returned; a missing or misshapen weight raises ModelFileError."""
        for m, mod in self._modules().items():
            for k, var in module_variables(mod).items():
                key = f"{m}/{k}"
                if key not in arrays or tuple(arrays[key].shape) != tuple(var.shape):
                    raise ModelFileError(f"model file does not fit this network: weight {key!r} is missing or "
                                         "has another shape")
                var.assign(arrays[key])
        for name, opt in (("actor_adam", self.actor_opt), ("critic_adam", self.critic_opt)):
            if f"{name}/t" in arrays:
                opt.load_state_arrays({k[len(name) + 1:]: v for k, v in arrays.items() if k.startswith(name + "/")})
        if "obs_rms/mean" in arrays:
            self.obs_rms.mean = np.asarray(arrays["obs_rms/mean"], np.float64)
            self.obs_rms.var = np.asarray(arrays["obs_rms/var"], np.float64)
            self.obs_rms.count = float(arrays["obs_rms/count"])
        if "ret_rms" in arrays:
            mean, var, count = (float(v) for v in arrays["ret_rms"])
            self.ret_mean.assign(mean)
            self.ret_var.assign(var)
            self.ret_count.assign(count)
        self.push_obs_stats()
        self.sync()

    # ------------------------------------------------------------------ export

    def policy_graph(self) -> PolicyGraph:
        """The actor for ``python -m export``: normalised observations, tanh, scaled to the Box bounds as
        ``scale_actions`` does; extra output: the critic's value of that action."""
        low, high = self.low.astype(np.float32), self.high.astype(np.float32)
        shape = tuple(self.action_space.shape)

        def act(x):
            o = self._norm_obs(tf.cast(x, tf.float32))
            unit = tf.tanh(self.actor(o))
            action = tf.reshape(low + (unit + 1.0) * 0.5 * (high - low), [-1, *shape])
            return {"action": action, "value": self._denorm_ret(self.critic(tf.concat([o, unit], -1))[:, 0])}

        stats = [self.obs_mean, self.obs_std, self.ret_mean, self.ret_var]
        return PolicyGraph(act, self.actor_vars + self.critic_vars + stats)

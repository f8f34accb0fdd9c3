"""DDPG model: actor, critic, their targets and the DDPG losses (one gradient step), with return
normalisation and Pop-Art.

Acting in numpy, the fused training block (``nb_train_steps`` gradient steps in ONE ``tf.function`` call on
pre-sampled batches), observation normalisation, action scaling and saving come from
``algos.offpolicy.actor_critic.ActorCriticModel``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from algos.offpolicy.actor_critic import ActorCriticModel, soft_update
from common.mpi import mpi_util
from common.nn.tf_util import Adam, clip_by_global_norm

if TYPE_CHECKING:
    from common.vec_env.base import VecObs

ALGORITHM = "ddpg"
STAT_NAMES = ("critic_loss", "actor_loss", "q_mean", "target_q_mean")


def _global_moments(x: np.ndarray) -> np.ndarray:
    """[mean, variance, count] of x over the data of all MPI ranks, as float32."""
    mean, std, count = mpi_util.mpi_moments(x, axis=0)
    return np.array([mean, np.square(std), count], np.float32)


class DDPGModel(ActorCriticModel):
    """Actor-critic pair with target networks and optimizers.

    Args:
        observation_space, action_space: the env's spaces (action space: bounded Box).
        network, network_kwargs: body of the actor and of the critic (the critic sees [obs, action]).
        seed: weight initialisation seed.
        gamma, tau: discount and soft target-update rate.
        actor_lr, critic_lr: Adam learning rates: numbers or schedules of the run's progress ("lin_1e-3":
            linear to 0; ``set_progress`` moves them).
        critic_l2_reg: L2 penalty on the critic body's weight matrices.
        max_grad_norm: global-norm clip of the actor gradients (None or 0: none).
        action_l2: weight of the mean squared action (in [-1, 1] units) added to the actor loss (0: none).
        reward_scale: rewards are multiplied by this before learning.
        normalize_observations: normalise inputs with running mean/std (saved with the model).
        obs_std_min: the smallest standard deviation the normalisation divides by (baselines' her: 0.01).
        target_min, target_max: bounds of the critic's TD target (None: open; baselines' her: -1/(1-gamma), 0).
        normalize_returns, popart: normalise the critic's targets (and preserve outputs, Pop-Art).
        jit_compile: compile the fused update with XLA (not under MPI; bench/ddpg_floor.py measures it).
        dict_observations: "keep" (a Dict observation per key: images through CNNs) or "flatten" (one vector).
        hyperparameters: recorded in saved files.
    """

    algorithm = ALGORITHM
    STAT_NAMES = STAT_NAMES

    def __init__(self, observation_space, action_space, *, network="mlp", network_kwargs=None, seed=None,
                 gamma=0.99, tau=0.01, actor_lr=1e-4, critic_lr=1e-3, critic_l2_reg=0.0, max_grad_norm=None,
                 action_l2=0.0, reward_scale=1.0, normalize_observations=True, normalize_returns=False, popart=False,
                 jit_compile=False, dict_observations="keep", obs_std_min=0.0, target_min=None, target_max=None,
                 hyperparameters=None):
        self._init_common(observation_space, action_space, network, network_kwargs, seed, hyperparameters,
                          normalize_observations, dict_observations, obs_std_min, target_min, target_max)
        self.gamma, self.tau, self.reward_scale = float(gamma), float(tau), float(reward_scale)
        self.critic_l2_reg, self.max_grad_norm = float(critic_l2_reg), max_grad_norm
        self.action_l2 = float(action_l2)
        self.normalize_returns, self.popart = bool(normalize_returns), bool(popart)
        self.actor = self._net("actor", self.obs_dim, self.act_dim, 0)
        self.critic = self._net("critic", self.obs_dim + self.act_dim, 1, 1)
        self.target_actor = self._target(self.actor)
        self.target_critic = self._target(self.critic)
        self.actor_vars = list(self.actor.trainable_variables)
        self.critic_vars = list(self.critic.trainable_variables)
        self.critic_kernels = self.critic.kernels()
        self.actor_opt = self._adam(self.actor_vars)
        self.critic_opt = self._adam(self.critic_vars)
        self.actor_lr, self.critic_lr = self._learning_rate(actor_lr), self._learning_rate(critic_lr)
        self.ret_mean = tf.Variable(0.0, trainable=False)
        self.ret_var = tf.Variable(1.0, trainable=False)
        self.ret_count = tf.Variable(1e-4, trainable=False)
        self._init_training(jit_compile)

    # ------------------------------------------------------------------ return normalisation

    def _ret_std(self):
        return tf.sqrt(tf.maximum(self.ret_var, 1e-4))

    def _denorm_ret(self, q):
        return q * self._ret_std() + self.ret_mean if self.normalize_returns else q

    def _export_value(self, o, unit):
        return self._denorm_ret(self._q(self.critic, o, unit))

    def _export_variables(self) -> list[tf.Variable]:
        return [self.ret_mean, self.ret_var]

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

    # ------------------------------------------------------------------ training

    def _train_step(self, obs, actions, rewards, next_obs, dones):
        o, o2 = self._norm_obs(obs), self._norm_obs(next_obs)
        q_next = self._denorm_ret(self._q(self.target_critic, o2, tf.tanh(self.target_actor(o2))))
        target = self._bounded_target(rewards * self.reward_scale + self.gamma * (1.0 - dones) * q_next)
        if self.normalize_returns:
            self._update_ret_stats(target)
            target_n = (target - self.ret_mean) / self._ret_std()
        else:
            target_n = target
        with tf.GradientTape() as tape:
            q = self._q(self.critic, o, actions)
            critic_loss = tf.reduce_mean(tf.square(q - target_n))
            if self.critic_l2_reg > 0:
                critic_loss += self.critic_l2_reg * tf.add_n([tf.nn.l2_loss(w) for w in self.critic_kernels])
        cgrads = self._allreduce(tape.gradient(critic_loss, self.critic_vars), self.critic_vars)
        self.critic_opt.apply(cgrads, self.critic_lr)
        with tf.GradientTape() as tape:
            unit = tf.tanh(self.actor(o))
            actor_loss = self._deterministic_actor_loss(self._denorm_ret(self._q(self.critic, o, unit)), unit)
        agrads = self._allreduce(tape.gradient(actor_loss, self.actor_vars), self.actor_vars)
        self.actor_opt.apply(clip_by_global_norm(agrads, self.max_grad_norm), self.actor_lr)
        soft_update(((self.actor, self.target_actor), (self.critic, self.target_critic)), self.tau)
        return tf.stack([critic_loss, actor_loss, tf.reduce_mean(self._denorm_ret(q)), tf.reduce_mean(target)])

    def q_value(self, obs: VecObs, actions: np.ndarray) -> np.ndarray:
        """Critic estimates for raw observations and env actions (one TF call)."""
        x = self._norm_obs(tf.nest.map_structure(tf.constant, self._tf_input(self.encoder(obs))))
        a = tf.constant(self.unscale_actions(actions))
        return self._denorm_ret(self._q(self.critic, x, a)).numpy()

    # ------------------------------------------------------------------ saving

    def _modules(self) -> dict[str, tf.Module]:
        return {"actor": self.actor, "critic": self.critic, "target_actor": self.target_actor,
                "target_critic": self.target_critic}

    def _optimizers(self) -> dict[str, Adam]:
        return {"actor_adam": self.actor_opt, "critic_adam": self.critic_opt}

    def _extra_arrays(self) -> dict[str, np.ndarray]:
        return {"ret_rms": np.array([self.ret_mean.numpy(), self.ret_var.numpy(), self.ret_count.numpy()], np.float64)}

    def _set_extra_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        if "ret_rms" in arrays:
            mean, var, count = (float(v) for v in arrays["ret_rms"])
            self.ret_mean.assign(mean)
            self.ret_var.assign(var)
            self.ret_count.assign(count)

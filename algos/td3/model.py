"""TD3 model (Fujimoto et al. 2018): deterministic actor, twin critics, target networks, delayed policy
updates and target policy smoothing; the losses of one gradient step.

The rest (numpy acting, the fused training block, observation normalisation, action scaling, saving)
comes from ``algos.offpolicy.actor_critic.ActorCriticModel``. The smoothing noise of every gradient step
is drawn in numpy with the batches (``EXTRA_KEYS``), so a seed fixes the whole run.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from algos.offpolicy.actor_critic import ActorCriticModel, soft_update
from common.nn.tf_util import Adam


class TD3Model(ActorCriticModel):
    """Actor, twin critics, their targets and optimizers.

    Arguments beyond those every ``ActorCriticModel`` takes:
        policy_delay: the actor and the targets are updated every ``policy_delay`` gradient steps.
        target_policy_noise, target_noise_clip: stddev and clip of the Gaussian noise added to the target
            actor's actions (in the [-1, 1] action units).
        obs_std_min: the smallest standard deviation the observation normalisation divides by.
        target_min, target_max: bounds of the critics' TD target (None: open).
        action_l2: weight of the mean squared action (in [-1, 1] units) added to the actor loss (0: none).
    """

    algorithm = "td3"
    STAT_NAMES = ("critic_loss", "actor_loss", "actor_updates", "q_mean")
    EXTRA_KEYS = ("target_noise",)
    default_network_kwargs = {"num_layers": 2, "num_hidden": 256, "activation": "relu"}  # noqa: RUF012 (read only)

    def __init__(self, observation_space, action_space, *, network="mlp", network_kwargs=None, seed=None,
                 gamma=0.99, tau=0.005, lr=1e-3, policy_delay=2, target_policy_noise=0.2, target_noise_clip=0.5,
                 normalize_observations=False, jit_compile=False, dict_observations="keep", obs_std_min=0.0,
                 target_min=None, target_max=None, action_l2=0.0, hyperparameters=None):
        self._init_common(observation_space, action_space, network, network_kwargs, seed, hyperparameters,
                          normalize_observations, dict_observations, obs_std_min, target_min, target_max)
        self.gamma, self.tau, self.policy_delay = float(gamma), float(tau), int(policy_delay)
        self.target_policy_noise, self.target_noise_clip = float(target_policy_noise), float(target_noise_clip)
        self.action_l2 = float(action_l2)
        od, ad = self.obs_dim, self.act_dim
        self.actor = self._net("actor", od, ad, 0)
        self.critic1 = self._net("critic1", od + ad, 1, 1)
        self.critic2 = self._net("critic2", od + ad, 1, 2)
        self.target_actor = self._target(self.actor)
        self.target_critic1, self.target_critic2 = self._target(self.critic1), self._target(self.critic2)
        self.actor_vars = list(self.actor.trainable_variables)
        self.critic_vars = list(self.critic1.trainable_variables) + list(self.critic2.trainable_variables)
        self.actor_opt, self.critic_opt = self._adam(self.actor_vars), self._adam(self.critic_vars)
        self.counter = tf.Module(name="updates")
        self.counter.n = tf.Variable(0, dtype=tf.int64, trainable=False)  # critic updates so far
        self.lr = self._learning_rate(lr)
        self.train_rng = np.random.default_rng(None if self.seed is None else self.seed + 104729)
        self._init_training(jit_compile)

    # ------------------------------------------------------------------ training

    def _actor_update(self, o):
        with tf.GradientTape() as tape:
            unit = tf.tanh(self.actor(o))
            actor_loss = self._deterministic_actor_loss(self._q(self.critic1, o, unit), unit)
        self.actor_opt.apply(self._allreduce(tape.gradient(actor_loss, self.actor_vars), self.actor_vars), self.lr)
        soft_update(((self.actor, self.target_actor), (self.critic1, self.target_critic1),
                     (self.critic2, self.target_critic2)), self.tau)
        return actor_loss

    def _critic_target(self, rewards, o2, dones, target_noise):
        """``r + gamma (1 - done) min(Q1', Q2')`` at the target actor's smoothed action (``target_noise``:
        standard normal draws, scaled by ``target_policy_noise`` and clipped), within the target bounds."""
        noise = tf.clip_by_value(target_noise * self.target_policy_noise, -self.target_noise_clip,
                                 self.target_noise_clip)
        a2 = tf.clip_by_value(tf.tanh(self.target_actor(o2)) + noise, -1.0, 1.0)
        q_next = tf.minimum(self._q(self.target_critic1, o2, a2), self._q(self.target_critic2, o2, a2))
        return self._bounded_target(rewards + self.gamma * (1.0 - dones) * q_next)

    def _train_step(self, obs, actions, rewards, next_obs, dones, target_noise):
        o = self._norm_obs(obs)
        target = self._critic_target(rewards, self._norm_obs(next_obs), dones, target_noise)
        with tf.GradientTape() as tape:
            q1, q2 = self._q(self.critic1, o, actions), self._q(self.critic2, o, actions)
            critic_loss = tf.reduce_mean(tf.square(q1 - target)) + tf.reduce_mean(tf.square(q2 - target))
        self.critic_opt.apply(self._allreduce(tape.gradient(critic_loss, self.critic_vars), self.critic_vars), self.lr)
        n = self.counter.n.assign_add(1)
        due = tf.equal(n % self.policy_delay, 0)
        actor_loss = tf.cond(due, lambda: self._actor_update(o), lambda: tf.constant(0.0))
        return tf.stack([critic_loss, actor_loss, tf.cast(due, tf.float32), tf.reduce_mean(q1)])

    def _extra_inputs(self, steps: int, batch_size: int) -> list[np.ndarray]:
        return [self.train_rng.standard_normal((steps, batch_size, self.act_dim), np.float32)]

    def _stats(self, out: np.ndarray) -> dict[str, float]:
        stats = super()._stats(out)
        share = stats.pop("actor_updates")  # the actor loss: mean over the steps that updated the actor
        stats["actor_loss"] = stats["actor_loss"] / share if share > 0 else None
        return stats

    # ------------------------------------------------------------------ saving

    def _modules(self) -> dict[str, tf.Module]:
        return {"actor": self.actor, "critic1": self.critic1, "critic2": self.critic2,
                "target_actor": self.target_actor, "target_critic1": self.target_critic1,
                "target_critic2": self.target_critic2, "updates": self.counter}

    def _optimizers(self) -> dict[str, Adam]:
        return {"actor_adam": self.actor_opt, "critic_adam": self.critic_opt}

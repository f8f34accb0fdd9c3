"""A2C model: the actor-critic, RMSProp, and the whole update (loss, gradient, clip, step) in one tf.function."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from algos.on_policy.model import ActorCriticModel, mean_over_ranks_tf
from common.nn.tf_util import RMSProp, clip_flat_by_norm, flatten_grads

ALGORITHM = "a2c"


class A2CModel(ActorCriticModel):
    """Synchronous advantage actor-critic (baselines' a2c): ``train(...)`` is one ``tf.function`` call that
    computes ``pg_loss - ent_coef * entropy + vf_coef * vf_loss`` over the whole rollout, averages the
    gradient over MPI ranks, clips its global norm and takes one RMSProp step.

    Args:
        observation_space, action_space: the env's spaces.
        network, network_kwargs, value_network, seed, log_std_init, use_sde: the actor-critic (see ``ActorCritic``).
        ent_coef, vf_coef, max_grad_norm: loss weights and global-norm clip (None or 0: no clipping).
        normalize_advantage: scale each rollout's advantages to mean 0 and standard deviation 1 (per rank).
        alpha, epsilon, rmsprop: RMSProp decay, epsilon and formula ("tf1" or "pytorch": ``RMSProp``).
        hyperparameters: recorded in saved files.
    """

    algorithm = ALGORITHM

    def __init__(self, observation_space, action_space, *, network="mlp", network_kwargs=None, seed=None,
                 value_network=None, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5, alpha=0.99, epsilon=1e-5,
                 rmsprop="tf1", log_std_init=0.0, use_sde=False, normalize_advantage=False, hyperparameters=None):
        super().__init__(observation_space, action_space, network=network, network_kwargs=network_kwargs,
                         seed=seed, value_network=value_network, log_std_init=log_std_init, use_sde=use_sde,
                         hyperparameters=hyperparameters)
        self.ent_coef, self.vf_coef, self.max_grad_norm = float(ent_coef), float(vf_coef), max_grad_norm
        self.normalize_advantage = bool(normalize_advantage)
        self.optimizer = RMSProp(self.variables, decay=alpha, epsilon=epsilon, style=rmsprop)
        self.optimizers = {"rmsprop": self.optimizer}
        # No XLA: its compilation adds ~1 s CPU to every run (first call 1.1-1.4 vs 0.15-0.2 s) for at most
        # 0.1 ms less per update, and RMSProp on one flat vector already keeps the graph small
        # (bench/on_policy_update.py).
        self._train = self.compile_update(self._train_graph)

    def _train_graph(self, lr, obs, actions, returns, values, states, resets, masks=None):
        recurrent = self.policy.recurrent
        with tf.GradientTape() as tape:
            if recurrent:
                neglogp, entropy, vpred = self.policy.evaluate(obs, actions, states, resets, masks)
            else:
                neglogp, entropy, vpred = self.policy.evaluate(obs, actions, masks=masks)
            returns, values = tf.reshape(returns, [-1]), tf.reshape(values, [-1])
            advantages = returns - values
            if self.normalize_advantage:
                mean, variance = tf.nn.moments(advantages, axes=[0])
                advantages = (advantages - mean) / (tf.sqrt(variance) + 1e-8)
            pg_loss = tf.reduce_mean(advantages * neglogp)
            vf_loss = tf.reduce_mean(tf.square(vpred - returns))
            ent = tf.reduce_mean(entropy)
            loss = pg_loss - ent * self.ent_coef + vf_loss * self.vf_coef
        grads = flatten_grads(tape.gradient(loss, self.variables), self.variables)  # None -> zeros
        if self.use_mpi:  # data parallelism: every rank applies the mean gradient
            grads = mean_over_ranks_tf(grads)
        self.optimizer.apply_flat(clip_flat_by_norm(grads, self.max_grad_norm), lr)
        return tf.stack([pg_loss, vf_loss, ent])

    def train(self, lr: float, obs: np.ndarray, actions: np.ndarray, returns: np.ndarray, values: np.ndarray,
              states: np.ndarray | None = None, resets: np.ndarray | None = None,
              masks: np.ndarray | None = None) -> dict[str, float]:
        """One A2C update on a rollout: flat [N, ...] arrays, or [nsteps, nenvs, ...] arrays with the
        recurrent state before the rollout (``states``) and the episode starts (``resets``); ``masks`` the
        rollout's action masks (None: no masking). Returns the losses."""
        out = self._train(np.float32(lr), obs, actions, returns, values, states, resets, masks)
        return dict(zip(("policy_loss", "value_loss", "policy_entropy"), out.tolist()))

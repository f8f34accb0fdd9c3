"""PPO2 model: the policy, its optimizer, the fused training step, acting and saving."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from algos.on_policy.model import ActorCriticModel, mean_over_ranks_tf
from common.nn.tf_util import Adam, clip_by_global_norm, flatten_grads, unflatten_grads

ALGORITHM = "ppo2"


class PPO2Model(ActorCriticModel):
    """PPO2 policy + optimizer. ``train(...)`` runs all epochs and minibatches of one update in ONE
    ``tf.function`` call (indices of the minibatches are drawn in numpy and passed in).

    Args:
        observation_space, action_space: the env's spaces.
        network, network_kwargs, value_network, seed, log_std_init, use_sde: the actor-critic (see ``ActorCritic``).
        ent_coef, vf_coef, max_grad_norm: loss weights and global-norm clip (None or 0: no clipping).
        clip_value_loss: clip the value prediction's change to the clip range as the policy's (baselines);
            False: the plain squared error (stable-baselines3's default).
        hyperparameters: recorded in saved files.
    """

    algorithm = ALGORITHM

    def __init__(self, observation_space, action_space, *, network="mlp", network_kwargs=None, seed=None,
                 value_network=None, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, log_std_init=0.0, use_sde=False,
                 clip_value_loss=True, jit_compile=True, hyperparameters=None):
        super().__init__(observation_space, action_space, network=network, network_kwargs=network_kwargs,
                         seed=seed, value_network=value_network, log_std_init=log_std_init, use_sde=use_sde,
                         hyperparameters=hyperparameters)
        policy = self.policy
        self.ent_coef, self.vf_coef, self.max_grad_norm = float(ent_coef), float(vf_coef), max_grad_norm
        self.clip_value_loss = bool(clip_value_loss)
        self.optimizer = Adam(self.variables, epsilon=1e-5)
        self.optimizers = {"adam": self.optimizer}
        # XLA fuses the whole update (all epochs and minibatches) into a few kernels: on the CartPole MLP
        # 0.66 -> 0.46 ms per gradient step under load, even when the machine is quiet. Only for MLPs: XLA's
        # CPU convolutions made a Nature-CNN update 37x slower (0.26 -> 9.6 s) and a board_cnn run 2.4x slower
        # (Connect Four self-play, 904 vs 2,148 env steps/s); not for recurrent nets (scan over time) nor under
        # MPI (the gradient allreduce is a numpy_function, which XLA cannot compile).
        convolutional = any(getattr(net, "convs", None) for net in (policy.net, policy.vnet))
        self.jit_compile = (bool(jit_compile) and policy.numpy_acting and not convolutional and not policy.recurrent
                            and not self.use_mpi)
        self._train = self.compile_update(self._train_graph, self.jit_compile)

    # ------------------------------------------------------------------ training

    def _minibatch_grads(self, cr, obs, actions, returns, values, neglogps, states, resets, masks=None):
        with tf.GradientTape() as tape:
            neglogp, entropy, vpred = self.policy.evaluate(obs, actions, states, resets, masks)
            returns, values, neglogps = (tf.reshape(a, [-1]) for a in (returns, values, neglogps))
            adv = returns - values
            adv = (adv - tf.reduce_mean(adv)) / (tf.math.reduce_std(adv) + 1e-8)
            vf_loss = tf.square(vpred - returns)
            if self.clip_value_loss:
                vclipped = values + tf.clip_by_value(vpred - values, -cr, cr)
                vf_loss = tf.maximum(vf_loss, tf.square(vclipped - returns))
            vf_loss = 0.5 * tf.reduce_mean(vf_loss)
            ratio = tf.exp(neglogps - neglogp)
            pg_loss = tf.reduce_mean(tf.maximum(-adv * ratio, -adv * tf.clip_by_value(ratio, 1.0 - cr, 1.0 + cr)))
            ent = tf.reduce_mean(entropy)
            loss = pg_loss - ent * self.ent_coef + vf_loss * self.vf_coef
        grads = tape.gradient(loss, self.variables)
        grads = [g if g is not None else tf.zeros_like(v) for g, v in zip(grads, self.variables)]
        if self.use_mpi:  # seam for MPI data parallelism: average the flat gradient across ranks
            grads = unflatten_grads(mean_over_ranks_tf(flatten_grads(grads, self.variables)), self.variables)
        grads = clip_by_global_norm(grads, self.max_grad_norm)
        approxkl = 0.5 * tf.reduce_mean(tf.square(neglogp - neglogps))
        clipfrac = tf.reduce_mean(tf.cast(tf.abs(ratio - 1.0) > cr, tf.float32))
        return grads, tf.stack([pg_loss, vf_loss, ent, approxkl, clipfrac])

    def _train_graph(self, lr, cliprange, obs, actions, returns, values, neglogps, states, resets, indices,
                     masks=None):
        n = tf.shape(indices)[0]
        recurrent = self.policy.recurrent

        def step(i: tf.Tensor, stats: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            idx = indices[i]
            if recurrent:  # minibatches of whole env sequences: [T, envs_in_mb, ...]
                args = [tf.gather(a, idx, axis=1) for a in (obs, actions, returns, values, neglogps)]
                args += [tf.gather(states, idx), tf.gather(resets, idx, axis=1)]
                args.append(None if masks is None else tf.gather(masks, idx, axis=1))
            else:
                args = [tf.gather(a, idx) for a in (obs, actions, returns, values, neglogps)] + [None, None]
                args.append(None if masks is None else tf.gather(masks, idx))
            grads, s = self._minibatch_grads(cliprange, *args)
            self.optimizer.apply(grads, lr)
            return i + 1, stats + s

        _, stats = tf.while_loop(lambda i, _: i < n, step, (0, tf.zeros([5])))
        return stats / tf.cast(n, tf.float32)

    def train(self, lr: float, cliprange: float, obs: np.ndarray, actions: np.ndarray, returns: np.ndarray,
              values: np.ndarray, neglogps: np.ndarray, indices: np.ndarray, states: np.ndarray | None = None,
              resets: np.ndarray | None = None, masks: np.ndarray | None = None) -> dict[str, float]:
        """One PPO update over the rollout. ``indices[k]`` are the rows (feed-forward, flat batch) or env
        columns (recurrent, [nsteps, nenvs] arrays) of minibatch k; ``masks`` the rollout's action masks
        (None: no masking). Returns the mean losses."""
        out = self._train(np.float32(lr), np.float32(cliprange), obs, actions, returns, values, neglogps, states,
                          resets, indices, masks)
        return dict(zip(("policy_loss", "value_loss", "policy_entropy", "approxkl", "clipfrac"), out.tolist()))

"""TRPO model: policy and separate value network, the natural-gradient step (conjugate gradient on
Fisher-vector products, backtracking line search) and the value function's Adam epochs, in one tf.function."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from algos.on_policy.model import ActorCriticModel, mean_over_ranks_tf
from common.errors import ConfigError
from common.nn.distributions import tf_masked_logits
from common.nn.tf_util import (
    Adam,
    assign_flat,
    conjugate_gradient,
    flatten_grads,
    unflatten_grads,
)

ALGORITHM = "trpo"
LINE_SEARCH_STEPS = 10  # step fractions 1, 1/2, ..., 1/512 (baselines)
KL_SLACK = 1.5  # a step is accepted when its mean KL is at most KL_SLACK * max_kl (baselines)
STAT_NAMES = ("surrogate_before", "surrogate_after", "kl", "policy_entropy", "step_fraction",
              "expected_improvement", "value_loss")


class TRPOModel(ActorCriticModel):
    """Trust-region policy optimisation (Schulman et al. 2015; baselines' trpo_mpi design).

    ``train(...)`` is one ``tf.function`` call: the surrogate's gradient g (averaged over MPI ranks), the
    step direction F^-1 g by ``cg_iters`` conjugate-gradient iterations on Fisher-vector products (KL
    Hessian on every ``fvp_subsample``-th sample, averaged over ranks, plus ``cg_damping``), scaled to
    KL = ``max_kl``; a backtracking line search that accepts the first step fraction whose mean KL is at
    most 1.5 * ``max_kl`` and whose surrogate did not decrease (losses averaged over ranks, so every rank
    decides alike); then Adam epochs on the value network. The value network is always separate.

    Args:
        observation_space, action_space: the env's spaces.
        network, network_kwargs, seed, log_std_init, use_sde: the actor-critic (see ``ActorCritic``).
        max_kl, cg_iters, cg_damping, fvp_subsample: the trust region and its solver.
        ent_coef: entropy bonus in the surrogate.
        vf_stepsize: the value function's Adam learning rate.
        hyperparameters: recorded in saved files.
    """

    algorithm = ALGORITHM

    def __init__(self, observation_space, action_space, *, network="mlp", network_kwargs=None, seed=None,
                 max_kl=0.001, cg_iters=10, cg_damping=1e-2, fvp_subsample=5, ent_coef=0.0, vf_stepsize=3e-4,
                 log_std_init=0.0, use_sde=False, hyperparameters=None):
        try:
            super().__init__(observation_space, action_space, network=network, network_kwargs=network_kwargs,
                             seed=seed, value_network="copy", log_std_init=log_std_init, use_sde=use_sde,
                             hyperparameters=hyperparameters)
        except ConfigError as e:
            if "recurrent" in str(e):
                raise ConfigError("trpo does not support recurrent networks (its value function is a separate "
                                  "network); use an mlp or cnn network, or a2c / ppo2") from None
            raise
        if max_kl <= 0 or cg_iters < 1 or cg_damping < 0 or fvp_subsample < 1 or vf_stepsize <= 0:
            raise ConfigError("trpo needs max_kl > 0, cg_iters >= 1, cg_damping >= 0, fvp_subsample >= 1 and "
                              "vf_stepsize > 0")
        self.max_kl, self.cg_iters, self.cg_damping = float(max_kl), int(cg_iters), float(cg_damping)
        self.fvp_subsample, self.ent_coef, self.vf_stepsize = int(fvp_subsample), float(ent_coef), float(vf_stepsize)
        self.pi_vars, self.vf_vars = self.policy.policy_variables(), self.policy.value_variables()
        self.vf_optimizer = Adam(self.vf_vars, epsilon=1e-8)  # baselines' MpiAdam epsilon
        self.optimizers = {"adam": self.vf_optimizer}
        # Fused: 1.3-1.9x faster than a Python-driven CG and line search with a call per Fisher-vector
        # product and trial (bench/on_policy_update.py: 90-155 vs 147-291 ms per CartPole update, loaded
        # machine). Not XLA: no reliable gain in the same runs (73-107 vs 90-121 ms, either way round).
        self._train = self.compile_update(self._train_graph)

    # ------------------------------------------------------------------ pieces of the update

    def _mean(self, x: tf.Tensor) -> tf.Tensor:
        """``x`` averaged over MPI ranks (itself in a single process)."""
        return mean_over_ranks_tf(x) if self.use_mpi else x

    def _params(self, obs, masks) -> tf.Tensor:
        """The policy's distribution parameters, logits masked where ``masks`` (None: no masking) says."""
        return tf_masked_logits(self.policy.policy_params(obs), masks)

    def _losses(self, obs, actions, old_params, old_neglogp, advs, masks) -> tf.Tensor:
        """[surrogate gain (to maximise), mean KL(old || new), mean entropy] of the current policy (this rank)."""
        pd = self.policy.pdtype
        params = self._params(obs, masks)
        ratio = tf.exp(old_neglogp - pd.tf_neglogp(params, actions))
        entropy = tf.reduce_mean(pd.tf_entropy(params))
        surrogate = tf.reduce_mean(ratio * advs) + self.ent_coef * entropy
        return tf.stack([surrogate, tf.reduce_mean(pd.tf_kl(old_params, params)), entropy])

    def _fvp(self, vector, obs, old_params, masks) -> tf.Tensor:
        """Fisher-vector product F v (Hessian of the mean KL at the old policy), averaged over ranks, + damping * v."""
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                kl = tf.reduce_mean(self.policy.pdtype.tf_kl(old_params, self._params(obs, masks)))
            grad_kl = flatten_grads(inner.gradient(kl, self.pi_vars), self.pi_vars)
            grad_dot_v = tf.reduce_sum(grad_kl * tf.stop_gradient(vector))
        hvp = flatten_grads(outer.gradient(grad_dot_v, self.pi_vars), self.pi_vars)
        return self._mean(hvp) + self.cg_damping * vector

    def _policy_step(self, obs, actions, advs, masks) -> tf.Tensor:
        """The natural-gradient step with its line search (weights changed in place); returns the first six
        of ``STAT_NAMES``."""
        advs = (advs - tf.reduce_mean(advs)) / (tf.math.reduce_std(advs) + 1e-8)
        old_params = tf.stop_gradient(self._params(obs, masks))
        old_neglogp = self.policy.pdtype.tf_neglogp(old_params, actions)
        theta0 = flatten_grads(self.pi_vars, self.pi_vars)
        with tf.GradientTape() as tape:
            losses = self._losses(obs, actions, old_params, old_neglogp, advs, masks)
            surrogate = losses[0]
        # one Allreduce for the gradient and the losses: two independent collectives in one graph could run
        # in a different order on each rank
        both = self._mean(tf.concat([flatten_grads(tape.gradient(surrogate, self.pi_vars), self.pi_vars), losses], 0))
        grad, before = both[:-3], both[-3:]
        k = self.fvp_subsample
        sub_obs, sub_old, sub_masks = obs[::k], old_params[::k], None if masks is None else masks[::k]
        stepdir = conjugate_gradient(lambda v: self._fvp(v, sub_obs, sub_old, sub_masks), grad, self.cg_iters)
        shs = 0.5 * tf.tensordot(stepdir, self._fvp(stepdir, sub_obs, sub_old, sub_masks), 1)
        fullstep = stepdir / tf.sqrt(tf.maximum(shs, 1e-20) / self.max_kl)
        expected = tf.tensordot(grad, fullstep, 1)

        def untried(k: tf.Tensor, fraction: tf.Tensor, accepted: tf.Tensor, after: tf.Tensor) -> tf.Tensor:
            return (k < LINE_SEARCH_STEPS) & (accepted == 0.0)

        def trial_step(k: tf.Tensor, fraction: tf.Tensor, accepted: tf.Tensor,
                       after: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
            assign_flat(self.pi_vars, theta0 + fraction * fullstep)
            trial = self._mean(self._losses(obs, actions, old_params, old_neglogp, advs, masks))
            ok = (tf.reduce_all(tf.math.is_finite(trial)) & (trial[1] <= KL_SLACK * self.max_kl)
                  & (trial[0] >= before[0]))
            return k + 1, fraction * 0.5, tf.where(ok, fraction, 0.0), tf.where(ok, trial, after)

        _, _, accepted, after = tf.while_loop(untried, trial_step, (0, tf.constant(1.0), tf.constant(0.0), before))
        # the accepted step again (same values), or the old policy when no step was acceptable
        assign_flat(self.pi_vars, tf.where(accepted > 0.0, theta0 + accepted * fullstep, theta0))
        return tf.stack([before[0], after[0], after[1], after[2], accepted, expected])

    def _value_step(self, obs, returns) -> tf.Tensor:
        """One Adam step on the value loss of a minibatch (gradient averaged over ranks); the loss."""
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self.policy.values(obs) - returns))
        grads = self._mean(flatten_grads(tape.gradient(loss, self.vf_vars), self.vf_vars))
        self.vf_optimizer.apply(unflatten_grads(grads, self.vf_vars), self.vf_stepsize)
        return loss

    def _value_epochs(self, obs, returns, indices) -> tf.Tensor:
        """One Adam step on the value loss per row of ``indices`` (minibatch rows); the mean loss."""
        n = tf.shape(indices)[0]

        def step(i: tf.Tensor, total: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            idx = indices[i]
            return i + 1, total + self._value_step(tf.gather(obs, idx), tf.gather(returns, idx))

        _, total = tf.while_loop(lambda i, _: i < n, step, (0, tf.constant(0.0)))
        return total / tf.maximum(tf.cast(n, tf.float32), 1.0)

    def _train_graph(self, obs, actions, advs, returns, vf_indices, masks=None):
        policy_stats = self._policy_step(obs, actions, advs, masks)
        # the value epochs touch other variables: without this dependency TF may run them alongside the
        # policy step, and the ranks' Allreduces would interleave differently
        with tf.control_dependencies([policy_stats]):
            value_loss = self._value_epochs(obs, returns, vf_indices)
        return tf.concat([policy_stats, [value_loss]], axis=0)

    def train(self, obs: np.ndarray, actions: np.ndarray, advs: np.ndarray, returns: np.ndarray, vf_indices: np.ndarray,
              masks: np.ndarray | None = None) -> dict[str, float]:
        """One TRPO update on a flat rollout (GAE advantages ``advs``, value targets ``returns``);
        ``vf_indices[k]`` are the rows of the value function's minibatch k; ``masks`` the rollout's action
        masks (None: no masking). Returns ``STAT_NAMES``."""
        out = self._train(obs, actions, np.asarray(advs, np.float32), np.asarray(returns, np.float32),
                          np.asarray(vf_indices, np.int32), masks)
        return dict(zip(STAT_NAMES, out.tolist()))

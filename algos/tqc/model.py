"""TQC model (Kuznetsov et al. 2020, truncated quantile critics): SAC's squashed-Gaussian actor and entropy
temperature, with ``n_critics`` critics that each predict ``n_quantiles`` quantiles of the return; the
target pools the target critics' quantiles at a policy sample of the next observation, sorts them and drops
the ``top_quantiles_to_drop_per_net * n_critics`` largest (against overestimation); each critic fits the
kept ones with the quantile Huber loss. The losses follow sb3-contrib's TQC.

Acting, the temperature update and the training noise are SAC's (``algos.sac.model.SACModel``); the rest
(numpy acting, the fused training block, observation normalisation, saving) comes from
``algos.offpolicy.actor_critic.ActorCriticModel``.
"""
from __future__ import annotations

import tensorflow as tf

from algos.offpolicy.actor_critic import soft_update
from algos.sac.model import SACModel, parse_ent_coef
from common.errors import ConfigError
from common.nn.tf_util import Adam

MAX_CRITICS, MAX_QUANTILES = 64, 1000  # bounds on what a setting (or a model file) may ask to build


def check_quantile_settings(n_quantiles: int, n_critics: int, top_quantiles_to_drop_per_net: int) -> None:
    """ConfigError unless the quantile settings leave at least one target quantile."""
    if not 1 <= int(n_critics) <= MAX_CRITICS:
        raise ConfigError(f"n_critics must be in [1, {MAX_CRITICS}], got {n_critics}")
    if not 1 <= int(n_quantiles) <= MAX_QUANTILES:
        raise ConfigError(f"n_quantiles must be in [1, {MAX_QUANTILES}], got {n_quantiles}")
    if not 0 <= int(top_quantiles_to_drop_per_net) < int(n_quantiles):
        raise ConfigError(f"top_quantiles_to_drop_per_net must be in [0, n_quantiles - 1] = [0, {int(n_quantiles) - 1}], "
                          f"got {top_quantiles_to_drop_per_net}")


def truncated_target(next_quantiles: tf.Tensor, rewards: tf.Tensor, dones: tf.Tensor, next_logp: tf.Tensor, *,
                     gamma: float, alpha: tf.Tensor | float, n_drop: int) -> tf.Tensor:
    """Target quantiles ``[B, kept]``: the pooled next quantiles ``[B, n_critics, n_quantiles]`` sorted, the
    ``n_drop`` largest dropped, then ``r + gamma (1 - done) (q - alpha log pi(a'|s'))`` (TF)."""
    total = int(next_quantiles.shape[1]) * int(next_quantiles.shape[2])
    pooled = tf.reshape(next_quantiles, [-1, total])
    kept = tf.sort(pooled, axis=-1)[:, :total - n_drop]
    soft = kept - alpha * next_logp[:, None]
    return rewards[:, None] + gamma * (1.0 - dones[:, None]) * soft


def quantile_huber_loss(current: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
    """The quantile Huber loss of ``current`` quantiles ``[B, n_critics, n_quantiles]`` against ``target``
    ``[B, kept]``, averaged over every (batch, critic, quantile, target) cell as sb3-contrib's TQC (TF)."""
    n_quantiles = current.shape[-1]
    tau = (tf.range(n_quantiles, dtype=tf.float32) + 0.5) / n_quantiles  # each quantile's level
    delta = target[:, None, None, :] - current[:, :, :, None]  # [B, n_critics, n_quantiles, kept]
    abs_delta = tf.abs(delta)
    huber = tf.where(abs_delta > 1.0, abs_delta - 0.5, 0.5 * tf.square(delta))
    weight = tf.abs(tau[None, None, :, None] - tf.cast(tf.stop_gradient(delta) < 0.0, tf.float32))
    return tf.reduce_mean(weight * huber)


class TQCModel(SACModel):
    """Squashed-Gaussian actor, ``n_critics`` quantile critics and their targets, entropy temperature.

    Arguments beyond those every ``ActorCriticModel`` takes: SAC's ``ent_coef`` and ``target_entropy``;
    ``n_quantiles``, the quantiles each critic predicts; ``n_critics``; ``top_quantiles_to_drop_per_net``,
    how many of the largest pooled target quantiles are dropped per critic; SAC's ``use_sde`` and
    ``log_std_init`` (gSDE).
    """

    algorithm = "tqc"

    def __init__(self, observation_space, action_space, *, network="mlp", network_kwargs=None, seed=None,
                 gamma=0.99, tau=0.005, lr=3e-4, ent_coef=None, target_entropy=None, n_quantiles=25, n_critics=2,
                 top_quantiles_to_drop_per_net=2, normalize_observations=False, jit_compile=False,
                 dict_observations="keep", use_sde=False, log_std_init=-3.0, hyperparameters=None):
        check_quantile_settings(n_quantiles, n_critics, top_quantiles_to_drop_per_net)
        self._init_common(observation_space, action_space, network, network_kwargs, seed, hyperparameters,
                          normalize_observations, dict_observations)
        self.gamma, self.tau = float(gamma), float(tau)
        self.n_quantiles, self.n_critics = int(n_quantiles), int(n_critics)
        self.n_drop = int(top_quantiles_to_drop_per_net) * self.n_critics
        self.learn_ent_coef, init = parse_ent_coef(ent_coef)
        self.target_entropy = float(-self.act_dim if target_entropy is None else target_entropy)
        od, ad = self.obs_dim, self.act_dim
        self._init_actor(use_sde, log_std_init)
        self.critics = [self._net(f"critic{i + 1}", od + ad, self.n_quantiles, i + 1) for i in range(self.n_critics)]
        self.target_critics = [self._target(c) for c in self.critics]
        self._init_temperature_and_training(init, self.critics, lr, jit_compile)

    # ------------------------------------------------------------------ training

    def _quantiles(self, critics, o, a):
        """The quantiles ``[B, n_critics, n_quantiles]`` of ``critics`` at observations ``o``, actions ``a`` (TF)."""
        return tf.stack([self._critic_outputs(c, o, a) for c in critics], axis=1)

    def _critic_target(self, rewards, o2, dones, eps_next, alpha):
        """The truncated target quantiles at a policy sample for the next observations (``eps_next``: its
        standard normal draws)."""
        a2, logp2 = self._policy(o2, eps_next)
        target = truncated_target(self._quantiles(self.target_critics, o2, a2), rewards, dones, logp2,
                                  gamma=self.gamma, alpha=alpha, n_drop=self.n_drop)
        return tf.stop_gradient(target)

    def _train_step(self, obs, actions, rewards, next_obs, dones, eps_next, eps_pi):
        o, o2 = self._norm_obs(obs), self._norm_obs(next_obs)
        alpha = tf.exp(self.ent.log_value)  # this step's temperature (before its own update, as sb3-contrib)
        with tf.GradientTape() as actor_tape:  # one policy sample for the temperature and the actor losses
            a_pi, logp_pi = self._policy(o, eps_pi)
        ent_loss = self._temperature_update(logp_pi) if self.learn_ent_coef else tf.constant(0.0)
        target = self._critic_target(rewards, o2, dones, eps_next, alpha)
        with tf.GradientTape() as tape:
            current = self._quantiles(self.critics, o, actions)
            critic_loss = quantile_huber_loss(current, target)
        self.critic_opt.apply(self._allreduce(tape.gradient(critic_loss, self.critic_vars), self.critic_vars), self.lr)
        with actor_tape:  # the critics as just updated
            q_pi = tf.reduce_mean(self._quantiles(self.critics, o, a_pi), axis=[1, 2])
            actor_loss = tf.reduce_mean(alpha * logp_pi - q_pi)
        self.actor_opt.apply(self._allreduce(actor_tape.gradient(actor_loss, self.actor_vars), self.actor_vars),
                             self.lr)
        soft_update(zip(self.critics, self.target_critics), self.tau)
        return tf.stack([critic_loss, actor_loss, alpha, ent_loss, -tf.reduce_mean(logp_pi), tf.reduce_mean(current)])

    # ------------------------------------------------------------------ export

    def _export_value(self, o, unit):
        """The value of the policy's action: the mean of every critic's quantiles."""
        return tf.reduce_mean(self._quantiles(self.critics, o, unit), axis=[1, 2])

    # ------------------------------------------------------------------ saving

    def _modules(self) -> dict[str, tf.Module]:
        return {"actor": self.actor, **{f"critic{i + 1}": c for i, c in enumerate(self.critics)},
                **{f"target_critic{i + 1}": c for i, c in enumerate(self.target_critics)}, "ent_coef": self.ent,
                **self._sde_modules()}

    def _optimizers(self) -> dict[str, Adam]:
        return {"actor_adam": self.actor_opt, "critic_adam": self.critic_opt, "ent_coef_adam": self.ent_opt}

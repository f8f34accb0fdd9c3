"""SAC model (Haarnoja et al. 2018): squashed-Gaussian actor, twin critics with polyak-averaged targets,
automatic entropy temperature; the losses of one gradient step.

The rest (numpy acting, the fused training block, observation normalisation, action scaling, saving)
comes from ``algos.offpolicy.actor_critic.ActorCriticModel``. The Gaussian noise of every gradient step
is drawn in numpy with the batches (``EXTRA_KEYS``), so a seed fixes the whole run.

With ``use_sde`` the actor is stable-baselines3's gSDE actor (``common.nn.sde``): its head gives the mean,
clipped to +-``CLIP_MEAN``, and a learned [latent_dim, action_dim] ``log_std`` the state-dependent noise
``z(s) @ theta``; each gradient step draws one ``theta`` for its policy and next-observation samples.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from algos.offpolicy.actor_critic import ActorCriticModel, soft_update
from common.errors import ConfigError
from common.nn.sde import np_sde_logstd, tf_squashed_sde_sample
from common.nn.tf_util import Adam

if TYPE_CHECKING:
    from common.vec_env.base import VecObs

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
EPS = 1e-6
CLIP_MEAN = 2.0  # gSDE: the mean before tanh clipped to +-this (stable-baselines3's clip_mean)


def parse_ent_coef(ent_coef: str | float | None) -> tuple[bool, float]:
    """(learned, initial value) of an ``ent_coef`` setting: "auto" (learned from 1.0), "auto_0.1" (learned
    from 0.1), or a number >= 0 (fixed); ConfigError otherwise."""
    if ent_coef is None or ent_coef == "auto":
        return True, 1.0
    if isinstance(ent_coef, str):
        kind, sep, value = ent_coef.partition("_")
        try:
            init = float(value) if kind == "auto" and sep else float("nan")
        except ValueError:
            init = float("nan")
        if not np.isfinite(init) or init <= 0:
            raise ConfigError(f"ent_coef={ent_coef!r} is not understood; use 'auto', 'auto_<initial value > 0>' "
                              "(e.g. 'auto_0.1') or a number >= 0")
        return True, init
    if isinstance(ent_coef, bool) or not np.isfinite(float(ent_coef)) or float(ent_coef) < 0:
        raise ConfigError(f"ent_coef must be 'auto', 'auto_<value>' or a number >= 0, got {ent_coef!r}")
    return False, float(ent_coef)


def squash(mean: tf.Tensor, log_std: tf.Tensor, eps: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Actions ``tanh(mean + std * eps)`` and their log-probabilities under the squashed Gaussian (TF)."""
    u = mean + tf.exp(log_std) * eps
    logp = tf.reduce_sum(-0.5 * tf.square(eps) - log_std - 0.5 * np.log(2.0 * np.pi), axis=-1)
    logp -= tf.reduce_sum(2.0 * (np.log(2.0) - u - tf.nn.softplus(-2.0 * u)), axis=-1)  # log(1 - tanh(u)^2)
    return tf.tanh(u), logp


class SACModel(ActorCriticModel):
    """Squashed-Gaussian actor, twin critics and their targets, entropy temperature, optimizers.

    Arguments beyond those every ``ActorCriticModel`` takes (``lr`` also drives the temperature):
        ent_coef: entropy temperature: "auto" / None (learned, from 1.0), "auto_<v>" (learned, from v) or a
            fixed number.
        target_entropy: the entropy the learned temperature aims at (None: -dim(actions)).
        use_sde: gSDE actor (see the module docstring).
        log_std_init: gSDE: the initial value of every entry of ``log_std``.
    """

    algorithm = "sac"
    STAT_NAMES = ("critic_loss", "actor_loss", "ent_coef", "ent_coef_loss", "entropy", "q_mean")
    EXTRA_KEYS = ("eps_next", "eps_pi")
    default_network_kwargs = {"num_layers": 2, "num_hidden": 256, "activation": "relu"}  # noqa: RUF012 (read only)

    def __init__(self, observation_space, action_space, *, network="mlp", network_kwargs=None, seed=None,
                 gamma=0.99, tau=0.005, lr=3e-4, ent_coef=None, target_entropy=None, normalize_observations=False,
                 jit_compile=False, dict_observations="keep", use_sde=False, log_std_init=-3.0, hyperparameters=None):
        self._init_common(observation_space, action_space, network, network_kwargs, seed, hyperparameters,
                          normalize_observations, dict_observations)
        self.gamma, self.tau = float(gamma), float(tau)
        self.learn_ent_coef, init = parse_ent_coef(ent_coef)
        self.target_entropy = float(-self.act_dim if target_entropy is None else target_entropy)
        od, ad = self.obs_dim, self.act_dim
        self._init_actor(use_sde, log_std_init)
        self.critic1 = self._net("critic1", od + ad, 1, 1)
        self.critic2 = self._net("critic2", od + ad, 1, 2)
        self.target_critic1, self.target_critic2 = self._target(self.critic1), self._target(self.critic2)
        self._init_temperature_and_training(init, [self.critic1, self.critic2], lr, jit_compile)

    def _init_actor(self, use_sde: bool, log_std_init: float) -> None:
        """The actor: a head of means and log-stds, or with ``use_sde`` a head of means and the gSDE
        ``log_std`` matrix (module ``sde``)."""
        self.use_sde = bool(use_sde)
        self.actor = self._net("actor", self.obs_dim, self.act_dim if self.use_sde else 2 * self.act_dim, 0)
        if not self.use_sde:
            return
        self.hyperparameters["use_sde"] = True  # the model file's actor has the gSDE form: the loader needs to know
        self.mean_bound = CLIP_MEAN
        self.latent_dim = int(self.actor.body.output_dim)
        self.sde = tf.Module(name="sde")
        self.sde.log_std = tf.Variable(np.full((self.latent_dim, self.act_dim), log_std_init, np.float32), name="log_std")
        self._tf_mean_latent = tf.function(lambda x: self._mean_latent(self._norm_obs(x)),
                                           input_signature=[self._input_spec([None])])

    def _init_temperature_and_training(self, init: float, critics: list, lr, jit_compile: bool) -> None:
        """The entropy temperature (from ``init``), the optimizers of the actor, ``critics`` and the
        temperature, the learning rate, the generators, and the fused update."""
        self.ent = tf.Module(name="ent_coef")
        self.ent.log_value = tf.Variable(np.log(init), dtype=tf.float32, trainable=self.learn_ent_coef)
        self.actor_vars = list(self.actor.trainable_variables) + ([self.sde.log_std] if self.use_sde else [])
        self.critic_vars = [v for c in critics for v in c.trainable_variables]
        self.actor_opt, self.critic_opt = self._adam(self.actor_vars), self._adam(self.critic_vars)
        self.ent_opt = self._adam([self.ent.log_value])
        self.lr = self._learning_rate(lr)
        self.train_rng = np.random.default_rng(None if self.seed is None else self.seed + 104729)
        self.act_rng = np.random.default_rng(None if self.seed is None else self.seed + 1)  # predict's samples
        self._init_training(jit_compile)

    # ------------------------------------------------------------------ training

    def _mean_latent(self, o):
        """gSDE: the clipped means and the latent features of normalised observations ``o`` (TF)."""
        latent = self.actor.latent(o)
        return self._bounded(self.actor.head(latent), tf.clip_by_value), latent

    def _policy(self, o, eps):
        """Policy samples and their log-probabilities for normalised observations ``o``: ``eps`` is [B,
        act_dim] standard normal, or with gSDE [latent_dim, act_dim], the noise matrix in units of its std."""
        if self.use_sde:
            return tf_squashed_sde_sample(*self._mean_latent(o), self.sde.log_std, eps)
        out = self.actor(o)
        log_std = tf.clip_by_value(out[:, self.act_dim:], LOG_STD_MIN, LOG_STD_MAX)
        return squash(out[:, :self.act_dim], log_std, eps)

    def _critic_target(self, rewards, o2, dones, eps_next, alpha):
        """``r + gamma (1 - done) (min(Q1', Q2') - alpha log pi)`` at a policy sample for the next
        observations (``eps_next``: its standard normal draws)."""
        a2, logp2 = self._policy(o2, eps_next)
        q_next = tf.minimum(self._q(self.target_critic1, o2, a2), self._q(self.target_critic2, o2, a2))
        return tf.stop_gradient(rewards + self.gamma * (1.0 - dones) * (q_next - alpha * logp2))

    def _train_step(self, obs, actions, rewards, next_obs, dones, eps_next, eps_pi):
        o, o2 = self._norm_obs(obs), self._norm_obs(next_obs)
        alpha = tf.exp(self.ent.log_value)  # this step's temperature (before its own update, as SB3)
        with tf.GradientTape() as actor_tape:  # one policy sample for the temperature and the actor losses
            a_pi, logp_pi = self._policy(o, eps_pi)
        ent_loss = self._temperature_update(logp_pi) if self.learn_ent_coef else tf.constant(0.0)
        target = self._critic_target(rewards, o2, dones, eps_next, alpha)
        with tf.GradientTape() as tape:
            q1, q2 = self._q(self.critic1, o, actions), self._q(self.critic2, o, actions)
            critic_loss = 0.5 * (tf.reduce_mean(tf.square(q1 - target)) + tf.reduce_mean(tf.square(q2 - target)))
        self.critic_opt.apply(self._allreduce(tape.gradient(critic_loss, self.critic_vars), self.critic_vars), self.lr)
        with actor_tape:  # the critics as just updated
            q_pi = tf.minimum(self._q(self.critic1, o, a_pi), self._q(self.critic2, o, a_pi))
            actor_loss = tf.reduce_mean(alpha * logp_pi - q_pi)
        self.actor_opt.apply(self._allreduce(actor_tape.gradient(actor_loss, self.actor_vars), self.actor_vars),
                             self.lr)
        soft_update(((self.critic1, self.target_critic1), (self.critic2, self.target_critic2)), self.tau)
        return tf.stack([critic_loss, actor_loss, alpha, ent_loss, -tf.reduce_mean(logp_pi), tf.reduce_mean(q1)])

    def _temperature_update(self, logp_pi):
        """One Adam step on log(temperature) for the loss ``-log_alpha * mean(log pi + target_entropy)``."""
        gap = tf.stop_gradient(tf.reduce_mean(logp_pi) + self.target_entropy)
        loss = -self.ent.log_value * gap
        self.ent_opt.apply(self._allreduce([-gap], [self.ent.log_value]), self.lr)
        return loss

    def _extra_spec(self) -> list[tf.TensorSpec]:
        if not self.use_sde:
            return super()._extra_spec()
        return [tf.TensorSpec([None, self.latent_dim, self.act_dim], tf.float32) for _ in self.EXTRA_KEYS]

    def _extra_inputs(self, steps: int, batch_size: int) -> list[np.ndarray]:
        if self.use_sde:  # one matrix per gradient step for both samples (as stable-baselines3)
            theta = self.train_rng.standard_normal((steps, self.latent_dim, self.act_dim), np.float32)
            return [theta for _ in self.EXTRA_KEYS]
        shape = (steps, batch_size, self.act_dim)
        return [self.train_rng.standard_normal(shape, np.float32) for _ in self.EXTRA_KEYS]

    # ------------------------------------------------------------------ acting

    def sync(self) -> None:
        """Refresh the numpy copies of the actor weights, the observation statistics and gSDE's std."""
        super().sync()
        if self.use_sde:
            self.sde_log_std = self.sde.log_std.numpy()
            self.sde_std = np.exp(self.sde_log_std)

    def mean_latent(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """gSDE: the clipped means [N, act_dim] and latent features [N, latent_dim] of encoded observations
        ``x`` (numpy mirror when there is one)."""
        if not self.actor.numpy_mirror:
            return tuple(t.numpy() for t in self._tf_mean_latent(self._tf_input(x)))
        latent = self.actor.numpy_latent(self.normalize(x), self._np_actor)
        return self._bounded(latent @ self._np_actor[-2] + self._np_actor[-1], np.clip), latent

    def sample_unit(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Actions in [-1, 1] sampled from the policy for encoded observations ``x`` (numpy); gSDE: from the
        state-dependent Gaussian of each observation, independently (no noise matrix)."""
        if self.use_sde:
            mean, latent = self.mean_latent(x)
            std = np.exp(np_sde_logstd(latent, self.sde_log_std))
            return np.tanh(mean + std * rng.standard_normal(mean.shape)).astype(np.float32)
        out = self.actor_output(x)
        mean, log_std = out[:, :self.act_dim], np.clip(out[:, self.act_dim:], LOG_STD_MIN, LOG_STD_MAX)
        return np.tanh(mean + np.exp(log_std) * rng.standard_normal(mean.shape)).astype(np.float32)

    def predict_batch(self, obs: VecObs, state: np.ndarray | None = None, episode_start: np.ndarray | None = None,
                      deterministic: bool = True) -> tuple[np.ndarray, None]:
        """Env actions for a batch of raw observations: the policy's mode (``deterministic``) or a sample."""
        x = self.encoder(obs)
        unit = self.act_unit(x) if deterministic else self.sample_unit(x, self.act_rng)
        return self.scale_actions(unit), None

    @property
    def ent_coef(self) -> float:
        """The current entropy temperature."""
        return float(np.exp(self.ent.log_value.numpy()))

    # ------------------------------------------------------------------ saving

    def _modules(self) -> dict[str, tf.Module]:
        return {"actor": self.actor, "critic1": self.critic1, "critic2": self.critic2,
                "target_critic1": self.target_critic1, "target_critic2": self.target_critic2, "ent_coef": self.ent,
                **self._sde_modules()}

    def _sde_modules(self) -> dict[str, tf.Module]:
        """gSDE's ``log_std`` module by name (none without gSDE)."""
        return {"sde": self.sde} if self.use_sde else {}

    def _optimizers(self) -> dict[str, Adam]:
        return {"actor_adam": self.actor_opt, "critic_adam": self.critic_opt, "ent_coef_adam": self.ent_opt}

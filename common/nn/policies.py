"""The actor-critic policy shared by on-policy algorithms.

``ActorCritic`` = network (+ optional separate value network) + policy head + value head over the
encoded observations of ``common.nn.obs_encoding.ObsEncoder``. It acts in numpy when the network has a
numpy mirror (mlp) and through one ``tf.function`` call otherwise.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from common.errors import ConfigError
from common.nn.direct_call import DirectCall
from common.nn.distributions import (
    CategoricalPdType,
    DiagGaussianPdType,
    MultiCategoricalPdType,
    make_pdtype,
    tf_masked_logits,
)
from common.nn.layers import Dense
from common.nn.models import build_network
from common.nn.obs_encoding import ObsEncoder
from common.nn.policy_export import PolicyGraph
from common.nn.sde import np_sde_logstd, tf_sde_logstd


class NumpyWeights:
    """Numpy acting's weights, ``params`` (None until read). A plain object: a tuple of lists set on a
    ``tf.Module`` is wrapped into trackable structures, which cost ~110 us per update of the weights."""

    params: tuple | None = None
    flat: np.ndarray | None = None  # the flat array ``params`` are views of (``mirror_from``), else None


class ActorCritic(tf.Module):
    """Policy and value function over one network.

    Args:
        observation_space, action_space: the env's spaces.
        network: registered network name or builder.
        value_network: None/"shared" (value head on the policy latent) or "copy" (own network).
        seed: seed of the weight initialisation.
        log_std_init: initial log standard deviation of a Gaussian policy (Box actions).
        use_sde: state-dependent exploration (``common.nn.sde``; Box actions): ``logstd`` is then a
            [latent_dim, action_dim] matrix and the standard deviation depends on the state.
        network_kwargs: passed to the network builder.
    """

    def __init__(self, observation_space, action_space, network="mlp", value_network=None, seed=None,
                 log_std_init=0.0, use_sde=False, **network_kwargs):
        super().__init__(name="policy")
        if value_network not in (None, "shared", "copy"):
            raise ConfigError(f"value_network must be None, 'shared' or 'copy', got {value_network!r}")
        self.observation_space, self.action_space = observation_space, action_space
        self.encoder = ObsEncoder(observation_space)
        self.pdtype = make_pdtype(action_space)
        base = np.random.SeedSequence(seed) if seed is not None else np.random.SeedSequence(np.random.randint(2**31))
        s_net, s_vnet, s_head = (int(s.generate_state(1)[0]) for s in base.spawn(3))
        self.net = build_network(network, self.encoder.shape, seed=s_net, **network_kwargs)
        self.recurrent = bool(getattr(self.net, "recurrent", False))
        self.state_size = int(getattr(self.net, "state_size", 0))
        if value_network == "copy":
            if self.recurrent:
                raise ConfigError("value_network='copy' is not supported with recurrent networks")
            self.vnet = build_network(network, self.encoder.shape, seed=s_vnet, **network_kwargs)
        else:
            self.vnet = None
        rng = np.random.default_rng(s_head)
        self.gaussian = isinstance(self.pdtype, DiagGaussianPdType)
        self.use_sde = bool(use_sde)
        if self.use_sde and not self.gaussian:
            raise ConfigError(f"use_sde needs Box actions (a Gaussian policy), not {action_space}")
        head = self.pdtype.size if self.gaussian else self.pdtype.param_size
        orthogonal = bool(network_kwargs.get("ortho_init", True))  # an mlp's switch, followed by the heads
        self.pi = Dense(self.net.output_dim, head, 0.01, rng, name="pi", orthogonal=orthogonal)
        self.vf = Dense((self.vnet or self.net).output_dim, 1, 1.0, rng, name="vf", orthogonal=orthogonal)
        if self.gaussian:
            shape = (self.net.output_dim, head) if self.use_sde else (head,)
            self.logstd = tf.Variable(np.full(shape, log_std_init, np.float32), name="logstd")
        self.numpy_acting = bool(getattr(self.net, "has_numpy_mirror", False)) and (
            self.vnet is None or bool(getattr(self.vnet, "has_numpy_mirror", False))
        )
        self._numpy = NumpyWeights()  # numpy acting's weights (a plain holder: see NumpyWeights)
        self._read_mirror = None
        self._mirror_counts: tuple[int, int | None] | None = None  # weights of net and vnet in the mirror
        self._tf_step = tf.function(self._step_graph, reduce_retracing=True)

    # ------------------------------------------------------------------ TF side

    def _prep(self, x):
        x = tf.cast(x, tf.float32)
        return x / 255.0 if self.encoder.is_image else x

    def _pi_head(self, latent):
        params = self.pi(latent)
        if self.use_sde:
            params = tf.concat([params, tf_sde_logstd(latent, self.logstd)], axis=-1)
        elif self.gaussian:
            params = tf.concat([params, params * 0.0 + self.logstd], axis=-1)
        return params

    def _heads(self, latent, vlatent):
        return self._pi_head(latent), self.vf(vlatent)[..., 0]

    def policy_params(self, obs: tf.Tensor) -> tf.Tensor:
        """Distribution params [N, P] of a feed-forward policy, without the value head (TF)."""
        return self._pi_head(self.net(self._prep(obs)))

    def values(self, obs: tf.Tensor) -> tf.Tensor:
        """Values [N] of a feed-forward policy, without the policy head (TF)."""
        x = self._prep(obs)
        return self.vf(self.vnet(x) if self.vnet is not None else self.net(x))[..., 0]

    def value_variables(self) -> list[tf.Variable]:
        """The variables of the value head and of the separate value network (when there is one)."""
        return [*self.vf.trainable_variables, *(self.vnet.trainable_variables if self.vnet is not None else ())]

    def policy_variables(self) -> list[tf.Variable]:
        """The variables the policy's distribution depends on: all but ``value_variables``."""
        value_ids = {id(v) for v in self.value_variables()}
        return [v for v in self.trainable_variables if id(v) not in value_ids]

    def forward(self, obs: tf.Tensor, state: tf.Tensor | None = None,
                resets: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor | None]:
        """TF forward pass. Feed-forward: obs [N, ...] -> (params [N, P], values [N], None).
        Recurrent: obs [T, B, ...], state [B, S], resets [T, B] -> (params [T, B, P], values [T, B], state)."""
        return self._forward(obs, state, resets)[:3]

    def _forward(self, obs, state=None, resets=None):
        """``forward``'s (params, values, state) and the policy network's latent features."""
        x = self._prep(obs)
        if self.recurrent:
            latent, state = self.net(x, state, resets)
            params, values = self._heads(latent, latent)
            return params, values, state, latent
        latent = self.net(x)
        vlatent = self.vnet(x) if self.vnet is not None else latent
        params, values = self._heads(latent, vlatent)
        return params, values, None, latent

    def evaluate(self, obs: tf.Tensor, actions: tf.Tensor, state: tf.Tensor | None = None,
                 resets: tf.Tensor | None = None,
                 masks: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(neglogp, entropy, values) of ``actions`` for training, flattened to one axis; the logits that
        ``masks`` (bool, one row per sample, or None) marks illegal are masked first."""
        params, values, _ = self.forward(obs, state, resets)
        params = tf.reshape(params, [-1, self.pdtype.param_size])
        if masks is not None:
            params = tf_masked_logits(params, tf.reshape(masks, [-1, self.pdtype.param_size]))
        actions = tf.reshape(actions, [-1, *self.pdtype.action_shape])
        return self.pdtype.tf_neglogp(params, actions), self.pdtype.tf_entropy(params), tf.reshape(values, [-1])

    def _step_graph(self, obs, state, resets):
        if self.recurrent:
            params, values, state, latent = self._forward(obs[None], state, resets[None])
            params, values, latent = params[0], values[0], latent[0]
        else:
            params, values, _, latent = self._forward(obs)
        return (params, values, state, latent) if self.use_sde else (params, values, state)

    def policy_graph(self) -> PolicyGraph:
        """The deterministic policy for export: mode of the action distribution, value, and action
        probabilities (categorical and Bernoulli policies); one step of a recurrent net; categorical
        policies take an optional action mask."""

        def act(x: tf.Tensor, state: tf.Tensor | None = None,
                action_mask: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
            if self.recurrent:
                latent, state = self.net.step(self._prep(x), state)
                params, values = self._heads(latent, latent)
            else:
                params, values, _ = self.forward(x)
            params = tf_masked_logits(params, action_mask)
            out = {"action": self.pdtype.tf_mode(params), "value": values}
            probs = self.pdtype.tf_probs(params)
            if probs is not None:
                out["probs"] = probs
            if self.recurrent:
                out["next_state"] = state
            return out

        categorical = isinstance(self.pdtype, (CategoricalPdType, MultiCategoricalPdType))
        return PolicyGraph(act, list(self.trainable_variables), self.state_size, masked=categorical)

    # ------------------------------------------------------------------ numpy side

    def mirror_variables(self) -> list[tf.Variable]:
        """The weights numpy acting reads, in ``set_mirror``'s order (empty without a numpy mirror)."""
        if not self.numpy_acting:
            return []
        vnet = self.vnet.numpy_variables() if self.vnet is not None else []
        gauss = [self.logstd] if self.gaussian else []
        return [*self.net.numpy_variables(), *vnet, self.pi.w, self.pi.b, self.vf.w, self.vf.b, *gauss]

    def set_mirror(self, values: Sequence[np.ndarray | tf.Tensor]) -> None:
        """Numpy acting from now on uses ``values``: arrays or eager tensors of ``mirror_variables``."""
        if not self.numpy_acting:
            return
        if self._mirror_counts is None:  # counted once: reading the layer lists costs more than acting
            self._mirror_counts = (len(self.net.numpy_variables()),
                                   None if self.vnet is None else len(self.vnet.numpy_variables()))
        values = [v if isinstance(v, np.ndarray) else v.numpy() for v in values]
        self._numpy.flat = None
        n_net, n_vnet = self._mirror_counts
        if n_vnet is None:
            self._numpy.params = (values[:n_net], None, *values[n_net:])
        else:
            self._numpy.params = (values[:n_net], values[n_net:n_net + n_vnet], *values[n_net + n_vnet:])

    def mirror_from(self, flat: np.ndarray, shapes: list[tuple[int, ...]]) -> None:
        """Numpy acting reads views of ``flat`` (the ``mirror_variables`` of ``shapes``, flattened and
        concatenated) from now on, so writing new weights into ``flat`` updates it in place."""
        ends = np.cumsum([int(np.prod(s)) for s in shapes]).tolist()
        self.set_mirror([flat[a:b].reshape(s) for a, b, s in zip([0, *ends[:-1]], ends, shapes)])
        self._numpy.flat = flat

    def reads_mirror_from(self, flat: np.ndarray) -> bool:
        """Whether numpy acting's weights are the views ``mirror_from(flat, ...)`` made (not replaced since)."""
        return self._numpy.flat is flat

    def sync(self) -> None:
        """Copy the current weights to numpy (after a change outside a fused update: loading, restoring);
        no-op without a numpy mirror. One TF call reads them all."""
        if not self.numpy_acting:
            return
        if self._read_mirror is None:
            variables = self.mirror_variables()
            self._read_mirror = DirectCall(tf.function(lambda: [v.read_value() for v in variables]))
        self.set_mirror(self._read_mirror())

    def initial_state(self, batch_size: int) -> np.ndarray | None:
        """Zero recurrent state, or None for feed-forward policies."""
        return np.zeros((batch_size, self.state_size), np.float32) if self.recurrent else None

    def exploration_std(self) -> np.ndarray:
        """gSDE's standard deviations ``exp(logstd)`` [latent_dim, action_dim] of the noise matrices, from the
        weights acting uses (numpy)."""
        if self.numpy_acting:
            if self._numpy.params is None:
                self.sync()
            return np.exp(self._numpy.params[6])
        return np.exp(self.logstd.numpy())

    def step(self, x: np.ndarray, state: np.ndarray | None = None,
             resets: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Distribution params, values and next state for an encoded batch ``x`` (numpy in, numpy out)."""
        return self.step_latent(x, state, resets)[:3]

    def step_latent(self, x: np.ndarray, state: np.ndarray | None = None, resets: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """``step``'s (params, values, next state) and the policy network's latent features [N, latent_dim]
        (gSDE's z(s); None when the policy acts through TF without gSDE)."""
        if self.numpy_acting:
            p = self._numpy.params
            if p is None:
                self.sync()
                p = self._numpy.params
            if self.encoder.is_image:
                x = x.astype(np.float32) / 255.0
            latent = self.net.numpy_forward(x, p[0])
            vlatent = latent if p[1] is None else self.vnet.numpy_forward(x, p[1])
            if self.gaussian:  # [mean, logstd] written into one array: no concatenate, no broadcast_to
                d = p[3].shape[0]
                params = np.empty((latent.shape[0], 2 * d), np.result_type(latent, p[2]))
                np.matmul(latent, p[2], out=params[:, :d])
                params[:, :d] += p[3]
                params[:, d:] = np_sde_logstd(latent, p[6]) if self.use_sde else p[6]
            else:
                params = latent @ p[2] + p[3]
            values = (vlatent @ p[4] + p[5])[:, 0]
            return params, values, state, latent
        if self.recurrent:
            if state is None:
                state = self.initial_state(len(x))
            if resets is None:
                resets = np.zeros(len(x), np.float32)
            params, values, state, *latent = self._tf_step(x, state, np.asarray(resets, np.float32))
            state = state.numpy()
        else:
            params, values, _, *latent = self._tf_step(x, np.zeros((0,), np.float32), np.zeros((0,), np.float32))
        return params.numpy(), values.numpy(), state, latent[0].numpy() if latent else None

    def value(self, x: np.ndarray, state: np.ndarray | None = None, resets: np.ndarray | None = None) -> np.ndarray:
        """Values of an encoded batch."""
        return self.step(x, state, resets)[1]

    def act(self, x: np.ndarray, rng: np.random.Generator | None, state: np.ndarray | None = None,
            resets: np.ndarray | None = None,
            deterministic: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Actions for an encoded batch: (actions, values, neglogps, next_state)."""
        params, values, state = self.step(x, state, resets)
        actions = self.pdtype.np_act(params, rng, deterministic)
        return actions, values, self.pdtype.np_neglogp(params, actions), state

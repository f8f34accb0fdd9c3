"""The model base of the off-policy actor-critics (ddpg, sac, td3, tqc).

It holds what they share: the networks (a registry body under a small linear head), observation
normalisation (numpy statistics mirrored into TF variables), action scaling between [-1, 1] and the env's
Box bounds, acting in numpy through the actor's numpy mirror, gradient averaging under MPI, soft target
updates, the fused training call (``steps`` gradient steps on pre-sampled batches in ONE ``tf.function``
call) and the arrays of a model file. Dict observations are kept per key (``dict_observations="keep"``):
image keys go through a registered ``cnn`` of their own in each network (``HeadNet``), the other keys are
flattened, normalised and concatenated before the CNN features; ``"flatten"`` flattens every key into one
vector (images as raw pixel values). A subclass builds its networks and optimizers, writes ``_train_step``
(one gradient step: its losses and updates) and names its statistics and modules.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import tensorflow as tf
from gymnasium import spaces

from algos.base import Model
from common.errors import ConfigError
from common.files.model_file import ModelFileError
from common.mpi import mpi_util
from common.nn.direct_call import DirectCall
from common.nn.layers import Dense
from common.nn.models import build_network
from common.nn.obs_encoding import IMAGES, VECTOR, MultiInputEncoder, ObsEncoder
from common.nn.policy_export import PolicyGraph
from common.nn.tf_util import Adam, flatten_grads, module_variables, unflatten_grads
from common.running_mean_std import RunningMeanStd
from common.schedules import ScheduleLike, make_schedule

if TYPE_CHECKING:
    from common.vec_env.base import VecObs

OBS_CLIP = 5.0
BATCH_KEYS = ("obs", "actions", "rewards", "next_obs", "dones")
DICT_MODES = ("keep", "flatten")  # the dict_observations setting
IMAGE_NETWORK = "cnn"  # the registered network of each image key (Nature CNN, as stable-baselines3's NatureCNN)


def check_action_space(space: spaces.Space, alg: str) -> None:
    """Raise ConfigError unless ``space`` is a Box with finite, non-empty bounds."""
    if not isinstance(space, spaces.Box):
        raise ConfigError(f"{alg} needs a continuous (Box) action space; this env's is {space}")
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        raise ConfigError(f"{alg} needs finite action bounds to scale its tanh actor; this env's are {space}")
    if np.any(space.high <= space.low):
        raise ConfigError(f"action space {space} has an empty range (high <= low)")


class HeadNet(tf.Module):
    """A body network from the registry followed by a linear head initialised in +-3e-3 (as baselines).

    With ``image_shapes`` (the image keys of a kept Dict observation) its input is ``{"vector": [B, in_dim],
    "images": {key: uint8 [B, *shape]}}``: each image, scaled by 1/255, goes through its own ``cnn`` and the
    features are concatenated after the vector part before the body."""

    def __init__(self, name: str, in_dim: int, out_dim: int, network, seed, network_kwargs: dict, alg: str = "ddpg",
                 image_shapes: dict[str, tuple[int, ...]] | None = None):
        super().__init__(name=name)
        self.cnns = {k: build_network(IMAGE_NETWORK, shape, seed=None if seed is None else seed + 7907 * (i + 1))
                     for i, (k, shape) in enumerate((image_shapes or {}).items())}
        in_dim += sum(int(c.output_dim) for c in self.cnns.values())
        self.body = build_network(network, (in_dim,), seed=seed, **network_kwargs)
        if getattr(self.body, "recurrent", False):
            raise ConfigError(f"{alg} needs a feed-forward network, {network!r} is recurrent")
        rng = np.random.default_rng(None if seed is None else seed + 7919)
        self.head = Dense(self.body.output_dim, out_dim, 1.0, name="head")
        self.head.w.assign(rng.uniform(-3e-3, 3e-3, (self.body.output_dim, out_dim)).astype(np.float32))
        self.head.b.assign(rng.uniform(-3e-3, 3e-3, out_dim).astype(np.float32))
        self.numpy_mirror = bool(getattr(self.body, "has_numpy_mirror", False)) and not self.cnns

    def features(self, x: tf.Tensor | dict[str, tf.Tensor | dict[str, tf.Tensor]]) -> tf.Tensor:
        """The body's input: ``x`` itself, or the vector part and each image's CNN features concatenated."""
        if not self.cnns:
            return x
        images = [self.cnns[k](tf.cast(x[IMAGES][k], tf.float32) / 255.0) for k in self.cnns]
        return tf.concat([x[VECTOR], *images], -1)

    def latent(self, x: tf.Tensor | dict[str, tf.Tensor | dict[str, tf.Tensor]]) -> tf.Tensor:
        """The body's output features under the head (TF)."""
        return self.body(self.features(x))

    def __call__(self, x):
        return self.head(self.latent(x))

    def kernels(self) -> list[tf.Variable]:
        """The body's weight matrices (what an L2 penalty acts on)."""
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

    def numpy_latent(self, x: np.ndarray, params: list[np.ndarray]) -> np.ndarray:
        """``latent`` in numpy with ``params`` as returned by ``numpy_params``."""
        return self.body.numpy_forward(x, params[:-2])

    def numpy_forward(self, x: np.ndarray, params: list[np.ndarray]) -> np.ndarray:
        """Forward pass in numpy with ``params`` as returned by ``numpy_params``."""
        return self.numpy_latent(x, params) @ params[-2] + params[-1]


def soft_update(pairs: Iterable[tuple[tf.Module, tf.Module]], tau: float) -> None:
    """Polyak averaging ``target += tau * (source - target)`` for (source, target) module pairs (in a graph)."""
    for src, dst in pairs:
        for a, b in zip(src.trainable_variables, dst.trainable_variables):
            b.assign(b + tau * (a - b))


class ActorCriticModel(Model):
    """Base of the off-policy actor-critic models (see the module docstring).

    The constructor arguments every subclass shares: ``observation_space, action_space``, the env's spaces
    (action space: bounded Box); ``network, network_kwargs``, the body of the actor and of each critic (a
    critic sees [obs, action]; mlp bodies take ``default_network_kwargs`` where ``network_kwargs`` say
    nothing); ``seed``, of weight initialisation and training noise; ``gamma, tau``, the discount and the
    polyak rate of the targets; ``lr``, the Adam learning rate, a number or a schedule of the run's progress
    ("lin_1e-3": linear to 0; ``set_progress`` moves it); ``normalize_observations``, inputs normalised with
    a running mean/std saved with the model; ``jit_compile``, the fused update compiled with XLA (not under
    MPI); ``dict_observations``, "keep" (a Dict observation per key: images through CNNs) or "flatten" (one
    vector); ``hyperparameters``, recorded in saved files.

    The subclass constructor calls ``_init_common`` first, builds its networks (``self.actor`` is a
    ``HeadNet`` whose first ``act_dim`` outputs are the deterministic action before tanh), then
    ``_init_training``. ``STAT_NAMES`` name what ``_train_step`` returns; ``mean_bound`` > 0 clips the
    actor's deterministic action to [-mean_bound, mean_bound] before tanh.
    """

    STAT_NAMES: ClassVar[tuple[str, ...]] = ()
    EXTRA_KEYS: ClassVar[tuple[str, ...]] = ()  # per-step random inputs of _train_step beyond the replay batch
    mean_bound = 0.0  # > 0: the deterministic action before tanh clipped to +-mean_bound
    action_l2 = 0.0  # deterministic actors (ddpg, td3): weight of the squared actions in the actor loss
    default_network_kwargs: ClassVar[dict] = {}  # mlp settings used where the user gave none

    def _init_common(self, observation_space, action_space, network, network_kwargs, seed, hyperparameters,
                     normalize_observations: bool, dict_observations: str = "keep", obs_std_min: float = 0.0,
                     target_min: float | None = None, target_max: float | None = None) -> None:
        self.observation_space, self.action_space = observation_space, action_space
        if dict_observations not in DICT_MODES:
            raise ConfigError(f"dict_observations must be one of {', '.join(DICT_MODES)}, got {dict_observations!r}")
        self.dict_observations = dict_observations
        keep = isinstance(observation_space, spaces.Dict) and dict_observations == "keep"
        self.encoder = MultiInputEncoder(observation_space) if keep else ObsEncoder(observation_space)
        if self.encoder.is_image:
            raise ConfigError(f"{self.algorithm} supports flat (non-image) observations, or images as keys of a Dict "
                              "observation")
        self.image_shapes = dict(getattr(self.encoder, "image_shapes", {}))
        self.obs_dim = int(np.prod(self.encoder.shape))
        self.act_dim = int(np.prod(action_space.shape))
        self.low = np.asarray(action_space.low, np.float64).reshape(-1)
        self.high = np.asarray(action_space.high, np.float64).reshape(-1)
        self.network, self.network_kwargs = network, dict(network_kwargs or {})
        self.hyperparameters = dict(hyperparameters or {})
        self.normalize_observations = bool(normalize_observations)
        self.obs_std_min = float(obs_std_min)
        self.target_min = None if target_min is None else float(target_min)
        self.target_max = None if target_max is None else float(target_max)
        if self.target_min is not None and self.target_max is not None and self.target_min > self.target_max:
            raise ConfigError(f"target_min ({self.target_min}) must not exceed target_max ({self.target_max})")
        self.seed = None if seed is None else int(seed)
        self.use_mpi = mpi_util.size() > 1
        self.train_time = 0.0  # seconds spent in the fused updates
        self.train_steps = 0
        self._lr_schedules: list[tuple[tf.Variable, Callable[[float], float]]] = []  # (variable, schedule) pairs set_progress moves

    def _net(self, name: str, in_dim: int, out_dim: int, offset: int) -> HeadNet:
        """A ``HeadNet`` seeded with seed + ``offset`` (the mlp defaults of the algorithm filled in)."""
        kwargs = self.network_kwargs
        if self.network == "mlp":
            kwargs = {**self.default_network_kwargs, **kwargs}
        return HeadNet(name, in_dim, out_dim, self.network, None if self.seed is None else self.seed + offset,
                       kwargs, self.algorithm, self.image_shapes)

    def _learning_rate(self, value: ScheduleLike) -> tf.Variable:
        """A learning-rate variable for ``value``: a number, or a schedule of the remaining progress such as
        ``"lin_3e-4"`` (``common.schedules``) that ``set_progress`` follows; it starts at the schedule's value at
        the start of training."""
        schedule = make_schedule(value)
        variable = tf.Variable(float(schedule(1.0)), trainable=False, dtype=tf.float32)
        if not str(getattr(schedule, "spec", "")).startswith("const_"):
            self._lr_schedules.append((variable, schedule))
        return variable

    def set_progress(self, remaining: float) -> None:
        """Set the scheduled learning rates for the ``remaining`` fraction of training (1 at its start, 0 at
        its end); constant ones are left alone."""
        for variable, schedule in self._lr_schedules:
            variable.assign(float(schedule(remaining)))

    @staticmethod
    def _target(net: HeadNet) -> HeadNet:
        """A target copy of ``net``: new variables, same values (no second initialisation)."""
        return copy.deepcopy(net)

    def _init_training(self, jit_compile: bool = False) -> None:
        """Observation statistics, the fused training function and the TF acting fallback."""
        self.obs_rms = RunningMeanStd(shape=(self.obs_dim,))
        self.obs_mean = tf.Variable(np.zeros(self.obs_dim, np.float32), trainable=False)
        self.obs_std = tf.Variable(np.ones(self.obs_dim, np.float32), trainable=False)
        self._np_actor: list[np.ndarray] = []
        self._np_obs = (np.zeros(self.obs_dim, np.float32), np.ones(self.obs_dim, np.float32))
        ad = self.act_dim
        spec = [self._input_spec([None, None]), tf.TensorSpec([None, None, ad], tf.float32),
                tf.TensorSpec([None, None], tf.float32), self._input_spec([None, None]),
                tf.TensorSpec([None, None], tf.float32)]
        spec += self._extra_spec()
        self.jit_compile = bool(jit_compile) and not self.use_mpi  # MPI's numpy_function cannot be compiled
        self._train = tf.function(self._train_graph, input_signature=spec, jit_compile=self.jit_compile)
        self._train_direct = DirectCall(self._train)  # one-step blocks: ~1 ms less per call (bench/offpolicy_call.py)
        self._tf_act = tf.function(
            lambda x: tf.tanh(self._bounded(self.actor(self._norm_obs(x))[:, :ad], tf.clip_by_value)),
            input_signature=[self._input_spec([None])])
        self._tf_actor_out = tf.function(lambda x: self.actor(self._norm_obs(x)),
                                         input_signature=[self._input_spec([None])])
        self.sync()

    def _extra_spec(self) -> list[tf.TensorSpec]:
        """The TensorSpecs of the ``EXTRA_KEYS`` inputs of a block: [steps, batch, act_dim] each."""
        return [tf.TensorSpec([None, None, self.act_dim], tf.float32) for _ in self.EXTRA_KEYS]

    def _bounded(self, mean, clip: Callable):
        """``mean`` clipped to +-``mean_bound`` by ``clip`` (``np.clip`` or ``tf.clip_by_value``) when it is > 0."""
        return clip(mean, -self.mean_bound, self.mean_bound) if self.mean_bound > 0 else mean

    def _input_spec(self, batch: list):
        """The TensorSpec of encoded observations with leading ``batch`` axes (a nest with image keys)."""
        vector = tf.TensorSpec([*batch, self.obs_dim], tf.float32)
        if not self.image_shapes:
            return vector
        return {VECTOR: vector, IMAGES: {k: tf.TensorSpec([*batch, *s], tf.uint8) for k, s in self.image_shapes.items()}}

    def _tf_input(self, x):
        """Encoded observations as the TF acting functions take them (the vector part float32)."""
        if isinstance(x, dict):
            return {VECTOR: np.asarray(x[VECTOR], np.float32), IMAGES: x[IMAGES]}
        return np.asarray(x, np.float32)

    @staticmethod
    def _adam(variables) -> Adam:
        return Adam(variables, epsilon=1e-8)

    # ------------------------------------------------------------------ normalisation

    def _norm_obs(self, x):
        """Normalised encoded observations (TF); images are left to the networks' 1/255 scaling."""
        if not self.normalize_observations:
            return x
        if isinstance(x, dict):
            return {**x, VECTOR: self._norm_obs(x[VECTOR])}
        return tf.clip_by_value((x - self.obs_mean) / self.obs_std, -OBS_CLIP, OBS_CLIP)

    def update_obs_stats(self, x: np.ndarray) -> None:
        """Merge a batch of encoded observations into the normalisation statistics (numpy side)."""
        if self.normalize_observations:
            self.obs_rms.update(x[VECTOR] if isinstance(x, dict) else x)

    def push_obs_stats(self) -> None:
        """Copy the numpy observation statistics into the TF graph's variables."""
        if self.normalize_observations:
            self.obs_mean.assign(self.obs_rms.mean.astype(np.float32))
            self.obs_std.assign(np.sqrt(np.maximum(self.obs_rms.var + 1e-8, self.obs_std_min ** 2)).astype(np.float32))

    def _bounded_target(self, target):
        """The critic's TD target clipped to [``target_min``, ``target_max``] (either bound None: open)."""
        if self.target_min is not None:
            target = tf.maximum(target, self.target_min)
        if self.target_max is not None:
            target = tf.minimum(target, self.target_max)
        return target

    def _deterministic_actor_loss(self, q_pi, unit):
        """``-mean(Q(s, pi(s)))``, plus ``action_l2`` times the mean squared action in [-1, 1] units when it is
        above 0 (baselines' her: actions pushed towards 0 unless the critic pays for them)."""
        loss = -tf.reduce_mean(q_pi)
        return loss + self.action_l2 * tf.reduce_mean(tf.square(unit)) if self.action_l2 > 0 else loss

    # ------------------------------------------------------------------ training

    def _allreduce(self, grads, variables):
        """Seam for MPI data parallelism: average the flat gradient across ranks (no-op for one process)."""
        if not self.use_mpi:
            return grads
        flat = tf.numpy_function(lambda g: mpi_util.allreduce_mean(g).astype(np.float32),
                                 [flatten_grads(grads, variables)], tf.float32)
        return unflatten_grads(flat, variables)

    @staticmethod
    def _critic_outputs(critic: HeadNet, o, a):
        """A critic's outputs ``[B, outputs]`` for (normalised) observations ``o`` and actions ``a`` in [-1, 1]
        (TF); the actions join the vector part of a multi-input observation."""
        if isinstance(o, dict):
            return critic({**o, VECTOR: tf.concat([o[VECTOR], a], -1)})
        return critic(tf.concat([o, a], -1))

    @classmethod
    def _q(cls, critic: HeadNet, o, a):
        """A one-output critic's values ``[B]`` for observations ``o`` and actions ``a`` (TF)."""
        return cls._critic_outputs(critic, o, a)[:, 0]

    def _train_step(self, obs, actions, rewards, next_obs, dones, *extra) -> tf.Tensor:
        """One gradient step on one batch; returns the statistics of ``STAT_NAMES`` as one vector."""
        raise NotImplementedError

    def _train_graph(self, obs, actions, rewards, next_obs, dones, *extra):
        n = tf.shape(rewards)[0]
        stats = tf.zeros([len(self.STAT_NAMES)])
        # AutoGraph rewrites only this loop: converting the step's losses, networks and optimizer (Python
        # control flow on Python values only) was ~80% of the first call's tracing time, for the same graph.
        step = tf.autograph.experimental.do_not_convert(self._train_step)
        def at(x: tf.Tensor | dict[str, tf.Tensor | dict[str, tf.Tensor]],
               i: tf.Tensor) -> tf.Tensor | dict[str, tf.Tensor | dict[str, tf.Tensor]]:
            return tf.nest.map_structure(lambda t: t[i], x)

        for i in tf.range(n):
            stats += step(at(obs, i), actions[i], rewards[i], at(next_obs, i), dones[i], *[e[i] for e in extra])
        return stats / tf.cast(n, tf.float32)

    def _extra_inputs(self, steps: int, batch_size: int) -> list[np.ndarray]:
        """The random inputs named by ``EXTRA_KEYS``, drawn in numpy for every step of a block."""
        return []

    def train(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        """Gradient steps on pre-sampled batches (arrays of shape ``(steps, batch_size, ...)``) in one
        TF call; then the numpy actor is refreshed. Returns the mean statistics of the steps.

        Under MPI this is a collective: observation statistics are merged across ranks first."""
        if self.normalize_observations:
            mpi_util.combine_running_mean_std(self.obs_rms)
        self.push_obs_stats()
        steps, batch_size = batch["rewards"].shape
        out = self._train_direct(*[batch[k] for k in BATCH_KEYS], *self._extra_inputs(steps, batch_size))
        self.sync()
        return self._stats(out.numpy())

    def _stats(self, out: np.ndarray) -> dict[str, float]:
        return dict(zip(self.STAT_NAMES, out.tolist()))

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
        if isinstance(x, dict):
            return {**x, VECTOR: self.normalize(x[VECTOR])}
        return np.clip((x - self._np_obs[0]) / self._np_obs[1], -OBS_CLIP, OBS_CLIP)

    def actor_output(self, x: np.ndarray) -> np.ndarray:
        """The actor's raw outputs for encoded observations ``x`` (numpy mirror when there is one)."""
        if self.actor.numpy_mirror:
            return self.actor.numpy_forward(self.normalize(x), self._np_actor)
        return self._tf_actor_out(self._tf_input(x)).numpy()

    def act_unit(self, x: np.ndarray, params: list[np.ndarray] | None = None) -> np.ndarray:
        """Deterministic actions in [-1, 1] for encoded observations ``x`` (numpy when possible)."""
        if self.actor.numpy_mirror:
            p = self._np_actor if params is None else params
            mean = self.actor.numpy_forward(self.normalize(x), p)[:, :self.act_dim]
            return np.tanh(self._bounded(mean, np.clip)).astype(np.float32)
        return self._tf_act(self._tf_input(x)).numpy()

    def scale_actions(self, unit: np.ndarray) -> np.ndarray:
        """Map actions from [-1, 1] to the env's Box bounds (per dimension, asymmetric bounds too)."""
        a = self.low + (np.asarray(unit, np.float64) + 1.0) * 0.5 * (self.high - self.low)
        return a.reshape((len(unit), *self.action_space.shape)).astype(self.action_space.dtype)

    def unscale_actions(self, actions: np.ndarray) -> np.ndarray:
        """The inverse of ``scale_actions``: env actions to [-1, 1] (flat)."""
        a = np.asarray(actions, np.float64).reshape(len(actions), -1)
        return (2.0 * (a - self.low) / (self.high - self.low) - 1.0).astype(np.float32)

    def initial_state(self, batch_size: int) -> None:
        """Not recurrent: None."""
        return

    def predict_batch(self, obs: VecObs, state: np.ndarray | None = None, episode_start: np.ndarray | None = None,
                      deterministic: bool = True) -> tuple[np.ndarray, None]:
        """Env actions for a batch of raw observations: ``(actions, None)``; the deterministic policy
        (exploration is added by ``learn``)."""
        return self.scale_actions(self.act_unit(self.encoder(obs))), None

    # ------------------------------------------------------------------ export

    def _export_value(self, o, unit):
        """The value of the policy's action in export's ``value`` output: the first critic's Q."""
        return self._q(self.critic1, o, unit)

    def _export_variables(self) -> list[tf.Variable]:
        """Variables besides the networks' and the observation statistics that ``_export_value`` reads."""
        return []

    def policy_graph(self) -> PolicyGraph:
        """The deterministic actor for ``python -m export``: normalised observations, tanh of the actor's
        first ``act_dim`` outputs, scaled to the Box bounds as ``scale_actions`` does; extra output: the
        critic's value of that action."""
        if self.image_shapes:
            raise NotImplementedError("export of Dict observations with image keys")
        low, high = self.low.astype(np.float32), self.high.astype(np.float32)
        shape = tuple(self.action_space.shape)

        def act(x: tf.Tensor) -> dict[str, tf.Tensor]:
            o = self._norm_obs(tf.cast(x, tf.float32))
            unit = tf.tanh(self._bounded(self.actor(o)[:, :self.act_dim], tf.clip_by_value))
            action = tf.reshape(low + (unit + 1.0) * 0.5 * (high - low), [-1, *shape])
            return {"action": action, "value": self._export_value(o, unit)}

        variables = self.actor_vars + self.critic_vars + [self.obs_mean, self.obs_std] + self._export_variables()
        return PolicyGraph(act, variables)

    # ------------------------------------------------------------------ saving

    def _modules(self) -> dict[str, tf.Module]:
        """The networks saved, by name."""
        raise NotImplementedError

    def _optimizers(self) -> dict[str, Adam]:
        """The optimizers saved, by name."""
        raise NotImplementedError

    def _extra_arrays(self) -> dict[str, np.ndarray]:
        """Further state a file holds (scalars such as return statistics)."""
        return {}

    def _set_extra_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore what ``_extra_arrays`` wrote (absent keys are left as they are)."""

    def get_arrays(self) -> dict[str, np.ndarray]:
        """Weights, optimizer states and normalisation statistics as named arrays."""
        arrays = {f"{m}/{k}": v.numpy() for m, mod in self._modules().items()
                  for k, v in module_variables(mod).items()}
        for name, opt in self._optimizers().items():
            arrays.update({f"{name}/{k}": v for k, v in opt.state_arrays().items()})
        arrays["obs_rms/mean"] = self.obs_rms.mean
        arrays["obs_rms/var"] = self.obs_rms.var
        arrays["obs_rms/count"] = np.asarray(self.obs_rms.count, np.float64)
        arrays.update(self._extra_arrays())
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
        for name, opt in self._optimizers().items():
            if f"{name}/t" in arrays:
                opt.load_state_arrays({k[len(name) + 1:]: v for k, v in arrays.items() if k.startswith(name + "/")})
        if "obs_rms/mean" in arrays:
            self.obs_rms.mean = np.asarray(arrays["obs_rms/mean"], np.float64)
            self.obs_rms.var = np.asarray(arrays["obs_rms/var"], np.float64)
            self.obs_rms.count = float(arrays["obs_rms/count"])
        self._set_extra_arrays(arrays)
        self.push_obs_stats()
        self.sync()

"""The base of the on-policy models: an ``ActorCritic`` policy, acting, named arrays, and the MPI gradient mean."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from algos.base import Model
from common.files.model_file import ModelFileError
from common.mpi import mpi_util
from common.nn.direct_call import DirectCall
from common.nn.distributions import to_env_actions
from common.nn.policies import ActorCritic
from common.nn.policy_export import PolicyGraph
from common.nn.tf_util import module_variables
from common.wrappers.action_mask import masked_logits

if TYPE_CHECKING:
    from common.vec_env.base import VecObs


def mean_over_ranks_tf(flat: tf.Tensor) -> tf.Tensor:
    """Inside a ``tf.function``: the mean of a flat float32 vector over the MPI ranks (one Allreduce).

    ``mpi_util.allreduce_mean`` is looked up at call time (tests wrap it)."""
    out = tf.numpy_function(lambda g: mpi_util.allreduce_mean(g).astype(np.float32), [flat], tf.float32)
    return tf.reshape(out, tf.shape(flat))


class ActorCriticModel(Model):
    """A ``Model`` around one ``ActorCritic``: acting (numpy where the network allows), and the arrays
    ``policy/<weight>`` plus ``<prefix>/<state>`` of each optimizer in ``self.optimizers``.

    Args:
        observation_space, action_space: the env's spaces.
        network, network_kwargs, value_network, seed, log_std_init, use_sde: the actor-critic (see
            ``ActorCritic``).
        hyperparameters: recorded in saved files.
    """

    optimizers: dict[str, Any]  # array-name prefix -> optimizer with state_arrays / load_state_arrays

    def __init__(self, observation_space, action_space, *, network: Any, network_kwargs: dict | None,
                 seed: int | None, value_network: str | None, log_std_init: float, use_sde: bool = False,
                 hyperparameters: dict | None) -> None:
        self.network, self.network_kwargs = network, dict(network_kwargs or {})
        self.policy = policy = ActorCritic(observation_space, action_space, network, value_network, seed,
                                           log_std_init=log_std_init, use_sde=use_sde, **self.network_kwargs)
        self.observation_space, self.action_space = policy.encoder.space, policy.action_space
        self.value_network = value_network
        self.hyperparameters = dict(hyperparameters or {})
        if use_sde:  # the model file's log_std is a matrix: the loader needs to know (a model built in Python too)
            self.hyperparameters["use_sde"] = True
        self.variables = list(module_variables(policy).values())
        self.use_mpi = mpi_util.size() > 1
        self.optimizers = {}

    def compile_update(self, graph: Callable[..., tf.Tensor], jit_compile: bool = False) -> Callable[..., np.ndarray]:
        """The update ``graph`` (a ``tf.function`` body that changes the weights and returns a float32 vector of
        stats) as one call: ``run(*numpy_args)`` updates, refreshes numpy acting's weights from the same call
        (read after the update inside the graph, copied into one array that acting reads views of) and returns
        the stats as numpy. Arguments: numpy arrays or None.

        Traced without AutoGraph (its conversion of the losses, networks and optimizers was most of the first
        call's time), so loops in ``graph`` are ``tf.while_loop``s. The stats and the weights come back as one
        flat tensor, split into numpy views afterwards: one output instead of one per weight
        (``bench/on_policy_update.py``)."""
        mirror = self.policy.mirror_variables()
        shapes = [tuple(v.shape) for v in mirror]
        n_weights = sum(int(np.prod(s)) for s in shapes)
        weights = np.empty(n_weights, np.float32)  # numpy acting reads views of it (ActorCritic.mirror_from)

        def update_and_read(*args: tf.Tensor | None) -> tf.Tensor:
            stats = tf.reshape(graph(*args), [-1])
            return tf.concat([stats, *(tf.reshape(v.read_value(), [-1]) for v in mirror)], 0)

        call = DirectCall(tf.function(update_and_read, reduce_retracing=True, jit_compile=jit_compile, autograph=False))

        def run(*args: np.ndarray | None) -> np.ndarray:
            out = call(*args).numpy()
            n_stats = out.size - n_weights
            if mirror:
                weights[:] = out[n_stats:]
                if not self.policy.reads_mirror_from(weights):  # first call, or sync() replaced the views
                    self.policy.mirror_from(weights, shapes)
            return out[:n_stats]

        return run

    # ------------------------------------------------------------------ acting

    def initial_state(self, batch_size: int) -> np.ndarray | None:
        """Zero recurrent state (None for feed-forward networks)."""
        return self.policy.initial_state(batch_size)

    def predict_batch(self, obs: VecObs, state: np.ndarray | None = None, episode_start: np.ndarray | None = None,
                      deterministic: bool = True, rng: np.random.Generator | None = None,
                      action_masks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Env actions (Box clipped to the bounds, the ``start`` of Discrete spaces added) for a batch of raw
        observations: ``(actions, next_state)``; never an action that ``action_masks`` (bool [N, mask size],
        ``common.wrappers.action_mask``) marks illegal."""
        x = self.policy.encoder(obs)
        if self.policy.recurrent and state is None:
            state = self.initial_state(len(x))
        resets = None if episode_start is None else np.asarray(episode_start, np.float32)
        if rng is None and not deterministic:
            rng = np.random.default_rng()
        params, _, state = self.policy.step(x, state, resets)
        if action_masks is not None:
            params = masked_logits(params, np.asarray(action_masks, bool).reshape(params.shape))
        return to_env_actions(self.policy.pdtype.np_act(params, rng, deterministic), self.action_space), state

    def step(self, obs: VecObs, state: np.ndarray | None = None, episode_start: np.ndarray | None = None,
             deterministic: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
        """baselines-style alias: ``(actions, values, state, neglogps)``."""
        x = self.policy.encoder(obs)
        a, v, nlp, state = self.policy.act(x, np.random.default_rng(), state, episode_start, deterministic)
        return a, v, state, nlp

    def value(self, obs: VecObs, state: np.ndarray | None = None,
              episode_start: np.ndarray | None = None) -> np.ndarray:
        """Value estimates for a batch of raw observations."""
        return self.policy.value(self.policy.encoder(obs), state, episode_start)

    # ------------------------------------------------------------------ saving

    def get_arrays(self) -> dict[str, np.ndarray]:
        """Policy weights and optimizer state as named arrays."""
        arrays = {f"policy/{k}": v.numpy() for k, v in module_variables(self.policy).items()}
        for prefix, optimizer in self.optimizers.items():
            arrays.update({f"{prefix}/{k}": v for k, v in optimizer.state_arrays().items()})
        return arrays

    def set_arrays(self, arrays: dict[str, np.ndarray], optimizer: bool = True) -> None:
        """Restore what ``get_arrays`` returned; a missing or misshapen weight raises ModelFileError.
        ``optimizer=False`` (or a file without the optimizer state) keeps the optimizers as they are."""
        for k, var in module_variables(self.policy).items():
            key = f"policy/{k}"
            if key not in arrays or tuple(arrays[key].shape) != tuple(var.shape):
                raise ModelFileError(f"model file does not fit this network: weight {k!r} is missing or has another shape")
            var.assign(arrays[key])
        for prefix, opt in self.optimizers.items():
            state = {k[len(prefix) + 1:]: v for k, v in arrays.items() if k.startswith(prefix + "/")}
            if optimizer and state:
                opt.load_state_arrays(state)
        self.policy.sync()

    # ------------------------------------------------------------------ export

    def policy_graph(self) -> PolicyGraph:
        """The deterministic policy for ``python -m export`` (``ActorCritic.policy_graph``)."""
        return self.policy.policy_graph()

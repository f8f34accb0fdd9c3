"""A trained policy as one TF function from raw env observations to env actions, for export.

An algorithm's model offers ``policy_graph() -> PolicyGraph``: its deterministic policy as TF code over
the encoded observation batch that ``ObsEncoder`` gives ``predict`` (uint8 images stay uint8; the
algorithm's own TF code scales them). ``ExportedPolicy`` puts around it what the numpy side does
around ``predict``: VecNormalize's observation statistics, the observation encoding (one-hot for
Discrete parts, Dict and Tuple flattened), and the env's action conventions (Box actions clipped to
the bounds, the ``start`` of Discrete spaces), so ``ExportedPolicy.act`` maps what the env returns to
what the env takes. ``common.nn.export_formats`` writes it as a SavedModel, TFLite or ONNX file.

Inputs: ``obs`` (or ``obs_<key>`` per part of a Dict/Tuple space) with a leading batch axis, in the
space's dtype, ``state`` [batch, state_size] for recurrent policies (zeros at an episode start), and, when
exported with ``action_mask=True``, ``action_mask`` (bool [batch, mask size], ``common.wrappers.action_mask``): the
action is then the best legal one. Exported without it, a policy ignores masks.
Outputs: ``action``, ``next_state`` (recurrent), and with ``extra_outputs`` what the algorithm adds:
``value``, ``probs`` (action probabilities) or ``q_values``.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf
from gymnasium import spaces

from common.nn.distributions import tf_to_env_actions
from common.nn.obs_encoding import ObsEncoder
from common.wrappers.action_mask import mask_size, random_masks

EXTRA_OUTPUTS = ("value", "probs", "q_values")


@dataclass
class PolicyGraph:
    """An algorithm's deterministic policy as TF code (what ``Model.policy_graph`` returns).

    Attributes:
        act: ``act(x)`` (feed-forward) or ``act(x, state)`` (recurrent), ``x`` an encoded observation
            batch as ``ObsEncoder`` gives it, returning a dict with ``action`` (the action ``predict``
            gives before the env's conventions: 0-based Discrete indices, Box actions unclipped),
            ``next_state`` when recurrent, and any of ``EXTRA_OUTPUTS``.
        variables: every variable ``act`` reads (saved with the exported function).
        state_size: size of the recurrent state (0: feed-forward).
        masked: ``act`` also takes ``action_mask=`` (bool [batch, mask size]) and then returns a legal action.
    """

    act: Callable[..., dict[str, tf.Tensor]]
    variables: Sequence[tf.Variable]
    state_size: int = 0
    masked: bool = False


@dataclass(frozen=True)
class ObsLeaf:
    """One input of the exported function: a non-composite part of the observation space."""

    name: str  # the input's name: "obs", or "obs_<key>" for a part of a Dict/Tuple space
    path: tuple  # keys from the observation to this part
    space: spaces.Space


def obs_leaves(space: spaces.Space, name: str = "obs", path: tuple = ()) -> list[ObsLeaf]:
    """The parts of ``space`` that become inputs, in ``ObsEncoder``'s order."""
    if isinstance(space, spaces.Dict):
        items = list(space.spaces.items())
    elif isinstance(space, spaces.Tuple):
        items = list(enumerate(space.spaces))
    else:
        return [ObsLeaf(name, path, space)]
    return [leaf for key, sub in items
            for leaf in obs_leaves(sub, f"{name}_{re.sub(r'[^A-Za-z0-9_]', '_', str(key))}", (*path, key))]


def input_arrays(observation_space: spaces.Space, obs: Any, state: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The exported function's inputs, by name, for a batch of raw observations (array, dict or tuple
    with a leading batch axis, as a vec env returns them) and, when given, the recurrent state."""
    feed = {}
    for leaf in obs_leaves(observation_space):
        part = obs
        for key in leaf.path:
            part = part[key]
        feed[leaf.name] = np.asarray(part, np.dtype(leaf.space.dtype))
    if state is not None:
        feed["state"] = np.asarray(state, np.float32)
    return feed


def input_spec(leaf: ObsLeaf) -> tf.TensorSpec:
    """Batch of raw observations of one part, in the space's own dtype."""
    shape = () if isinstance(leaf.space, spaces.Discrete) else tuple(leaf.space.shape)
    return tf.TensorSpec([None, *shape], tf.as_dtype(np.dtype(leaf.space.dtype)), name=leaf.name)


def tf_normalizer(leaves: list[ObsLeaf], vec_normalize_state: dict | None) -> Callable[[dict], dict]:
    """VecNormalize's observation normalisation (``VecNormalize.normalize_obs``) with frozen statistics,
    in float32; identity for parts without statistics."""
    state = vec_normalize_state or {}
    stats = {}
    for leaf in leaves:
        prefix = "obs" if not leaf.path else f"obs/{leaf.path[0]}"
        if f"{prefix}_mean" in state and len(leaf.path) <= 1:
            eps = float(np.asarray(state.get("epsilon", 1e-8)))
            std = np.sqrt(np.asarray(state[f"{prefix}_var"], np.float64) + eps)
            stats[leaf.name] = (np.asarray(state[f"{prefix}_mean"], np.float32), std.astype(np.float32),
                                float(np.asarray(state.get("clip_obs", 10.0))))

    def normalize(inputs: dict) -> dict:
        out = dict(inputs)
        for name, (mean, std, clip) in stats.items():
            out[name] = tf.clip_by_value((tf.cast(inputs[name], tf.float32) - mean) / std, -clip, clip)
        return out

    return normalize


def tf_encoder(space: spaces.Space) -> Callable[[dict], tf.Tensor]:
    """``ObsEncoder(space)`` in TF, over the inputs named by ``obs_leaves(space)``."""
    encoder = ObsEncoder(space)
    leaves = obs_leaves(space)
    if len(leaves) == 1 and not isinstance(space, (spaces.Dict, spaces.Tuple)):
        leaf = leaves[0]
        if isinstance(space, (spaces.Box, spaces.MultiBinary)):  # kept whole (images stay uint8)
            return lambda inputs: tf.cast(inputs[leaf.name], tf.as_dtype(encoder.dtype))
        return lambda inputs: _tf_flat(inputs[leaf.name], space)
    return lambda inputs: tf.concat([_tf_flat(inputs[leaf.name], leaf.space) for leaf in leaves], axis=1)


def _tf_flat(x: tf.Tensor, space: spaces.Space) -> tf.Tensor:
    """One part of an observation batch as ``[batch, size]`` float32 (one-hot for Discrete parts)."""
    if isinstance(space, spaces.Discrete):
        return tf.one_hot(tf.reshape(tf.cast(x, tf.int64), [-1]) - int(space.start), int(space.n), dtype=tf.float32)
    if isinstance(space, spaces.MultiDiscrete):
        nvec, start = np.asarray(space.nvec).ravel(), np.asarray(space.start).ravel()
        x = tf.reshape(tf.cast(x, tf.int64), [-1, len(nvec)])
        return tf.concat([tf.one_hot(x[:, i] - int(start[i]), int(n), dtype=tf.float32)
                          for i, n in enumerate(nvec)], axis=1)
    if isinstance(space, (spaces.Box, spaces.MultiBinary)):
        return tf.reshape(tf.cast(x, tf.float32), [-1, int(np.prod(space.shape))])
    raise TypeError(f"unsupported observation space {space}")


class ExportedPolicy(tf.Module):
    """The exported function ``act`` (a ``tf.function`` with a fixed input signature) and its variables.

    Args:
        graph: the algorithm's ``PolicyGraph``.
        observation_space, action_space: the model's spaces.
        vec_normalize_state: VecNormalize statistics saved with the model (None: none).
        extra_outputs: keep the algorithm's extra outputs (``EXTRA_OUTPUTS``).
        action_mask: add the input ``action_mask`` (the graph must be ``masked``).
    """

    def __init__(self, graph: PolicyGraph, observation_space: spaces.Space, action_space: spaces.Space,
                 vec_normalize_state: dict | None = None, extra_outputs: bool = False, action_mask: bool = False):
        super().__init__(name="policy")
        self.policy_variables = list(graph.variables)
        self.state_size = int(graph.state_size)
        leaves = obs_leaves(observation_space)
        if action_mask and not graph.masked:
            raise ValueError("this policy graph takes no action mask")
        self.mask_size = mask_size(action_space) if action_mask else None
        self.input_names = ([leaf.name for leaf in leaves] + (["state"] if self.state_size else [])
                            + (["action_mask"] if action_mask else []))
        specs = [input_spec(leaf) for leaf in leaves]
        if self.state_size:
            specs.append(tf.TensorSpec([None, self.state_size], tf.float32, name="state"))
        if action_mask:
            specs.append(tf.TensorSpec([None, self.mask_size], tf.bool, name="action_mask"))
        normalize, encode = tf_normalizer(leaves, vec_normalize_state), tf_encoder(observation_space)
        action_dtype = tf.as_dtype(np.dtype(action_space.dtype))

        def act(*args: tf.Tensor) -> dict[str, tf.Tensor]:
            inputs = dict(zip(self.input_names, args))
            x = encode(normalize(inputs))
            masks = {"action_mask": inputs["action_mask"]} if action_mask else {}
            out = graph.act(x, inputs["state"], **masks) if self.state_size else graph.act(x, **masks)
            keep = {"action", "next_state", *(EXTRA_OUTPUTS if extra_outputs else ())}
            out = {k: v for k, v in out.items() if k in keep}
            out["action"] = tf.cast(tf_to_env_actions(out["action"], action_space), action_dtype)
            return out

        self.act = tf.function(act, input_signature=specs)
        self._leaves, self._action_space = leaves, action_space

    def concrete_function(self) -> Any:
        """The traced ``act`` (what the formats convert)."""
        return self.act.get_concrete_function()

    def sample_inputs(self, n: int, seed: int = 0) -> dict[str, np.ndarray]:
        """``n`` inputs sampled from the observation space (float parts clipped to +-1000, so unbounded
        spaces give finite numbers) and a random state."""
        rng = np.random.default_rng(seed)
        feed = {}
        for i, leaf in enumerate(self._leaves):
            space = copy.deepcopy(leaf.space)  # seeding the model's own space would change its samples
            space.seed(seed + i)
            batch = np.stack([np.asarray(space.sample()) for _ in range(n)])
            if np.issubdtype(batch.dtype, np.floating):
                batch = np.clip(batch, -1e3, 1e3).astype(batch.dtype)
            feed[leaf.name] = batch
        if self.state_size:
            feed["state"] = rng.standard_normal((n, self.state_size)).astype(np.float32)
        if self.mask_size is not None:
            feed["action_mask"] = random_masks(rng, n, self._action_space)
        return feed

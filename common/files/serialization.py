"""What every algorithm's model file shares: its metadata, the checks on reading it, the network to
rebuild it with, and restoring a model (and the env's VecNormalize) from it.

The file format itself is ``common.files.model_file``; spaces are described by ``common.files.space_json``.
"""
from __future__ import annotations

import platform
from typing import Any

import numpy as np
from gymnasium import spaces

from common.files.model_file import ModelFile, ModelFileError
from common.files.space_json import (
    MAX_SPACE_ELEMENTS,
    check_spaces,
    space_size,
    space_to_json,
)

SMALL_SIZE = 64  # a size in metadata above this must be a dimension of some array in the file
METADATA_TYPES = {"algorithm": str, "network": str, "network_kwargs": dict, "observation_space": dict,
                  "action_space": dict}


def library_versions() -> dict[str, str]:
    """Versions of the libraries that matter for a model file."""
    import gymnasium

    out = {"python": platform.python_version(), "numpy": np.__version__, "gymnasium": gymnasium.__version__}
    try:
        import tensorflow as tf

        out["tensorflow"] = tf.__version__
    except ImportError:  # pragma: no cover
        pass
    return out


def network_name(network: Any) -> str:
    """A name for ``network`` that ``common.nn.models.get_network_builder`` resolves again."""
    if isinstance(network, str):
        return network
    return getattr(network, "network_name", None) or f"{network.__module__}:{network.__qualname__}"


def model_metadata(algorithm: str, *, network: Any, network_kwargs: dict, observation_space: spaces.Space,
                   action_space: spaces.Space, hyperparameters: dict, vec_normalize_state: dict | None,
                   num_timesteps: int, **extra: Any) -> dict:
    """The JSON metadata of a model file: the fields every algorithm writes, plus its own ``extra``."""
    vn = vec_normalize_state
    return {
        "algorithm": algorithm,
        "network": network_name(network),
        "network_kwargs": network_kwargs,
        "hyperparameters": hyperparameters,
        "observation_space": space_to_json(observation_space),
        "action_space": space_to_json(action_space),
        "vec_normalize": None if vn is None else {k: np.asarray(v).tolist() for k, v in vn.items()},
        "num_timesteps": int(num_timesteps),
        "versions": library_versions(),
        **extra,
    }


def read_model_file(path: str, algorithm: str, env: Any = None) -> ModelFile:
    """Open a model file that must hold an ``algorithm`` model fitting ``env``'s spaces, with the
    metadata fields every model file has, of the right types."""
    opened = ModelFile(path)
    metadata = opened.metadata
    if metadata.get("algorithm") != algorithm:
        raise ModelFileError(f"{path!r} holds a {metadata.get('algorithm')!r} model, not a {algorithm} model")
    for key, kind in METADATA_TYPES.items():
        if not isinstance(metadata.get(key), kind):
            raise ModelFileError(f"{path!r}: metadata field {key!r} is missing or not a {kind.__name__}")
    check_backed_sizes(metadata["network_kwargs"], opened, "network_kwargs")
    check_space_sizes(opened)
    if env is not None:
        check_spaces(metadata, env)
    return opened


def check_space_sizes(opened: ModelFile) -> None:
    """Refuse spaces in the metadata that are oversized (``space_size``) or that the file's arrays do not
    back: a flat encoding wider than ``SMALL_SIZE`` (one-hot Discrete, a flattened Box: a dense layer's
    input or output width) must be at most the largest dimension of the file's arrays, and a space's
    elements at most the elements of the file's arrays. Read from the JSON alone, before anything is built."""
    largest = max(opened.dimensions(), default=0)
    elements = opened.elements()
    for key in ("observation_space", "action_space"):
        try:
            size = space_size(opened.metadata[key], key)
        except ModelFileError as e:
            raise ModelFileError(f"{opened.path!r}: {e}") from None
        if size.dense_width > max(SMALL_SIZE, largest):
            raise ModelFileError(f"{opened.path!r}: {key} asks for a layer {size.dense_width} wide; no array in "
                                 f"the file is wider than {largest}")
        if size.elements > max(SMALL_SIZE, elements):
            raise ModelFileError(f"{opened.path!r}: {key} has {size.elements} elements, more than all the "
                                 f"file's arrays ({elements})")


def check_backed_sizes(value: Any, opened: ModelFile, where: str) -> None:
    """Refuse a size in metadata (any int above ``SMALL_SIZE`` in ``value``) that no array of the file
    has as a dimension: the model built from the metadata would allocate what the file does not hold."""
    dims = opened.dimensions()

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for item in v.values():
                walk(item)
        elif isinstance(v, (list, tuple)):
            for item in v:
                walk(item)
        elif isinstance(v, int) and not isinstance(v, bool) and (v < 0 or v > SMALL_SIZE) and v not in dims:
            raise ModelFileError(f"{opened.path!r}: {where} asks for size {v}, which no array in the file has")

    walk(value)


def metadata_field(opened: ModelFile, key: str, kind: type | tuple[type, ...], default: Any,
                   section: dict | None = None) -> Any:
    """``section[key]`` (default: the metadata's), checked to be of ``kind``; ``default`` when absent.
    An int is accepted where a float is expected."""
    source = opened.metadata if section is None else section
    if key not in source:
        return default
    value = source[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds and type(value) is int:
        value = float(value)
    if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
        raise ModelFileError(f"{opened.path!r}: metadata field {key!r} has the wrong type ({type(value).__name__})")
    return value


def trusted_network(opened: ModelFile, user_network: Any = None) -> Any:
    """The network to rebuild a model file with, never code chosen by the file.

    A file may name a network registered by this project; any other name (``package.module:builder``)
    is accepted only when the user passes the same network (``--network=...``), which is then what is
    built. Raises ``ModelFileError`` otherwise.
    """
    from common.nn.models import get_network_builder, registered_networks

    name, path = opened.metadata["network"], opened.path
    if user_network is not None:
        if network_name(get_network_builder(user_network)) != name and user_network != name:
            raise ModelFileError(f"{path!r} was trained with network {name!r}, not {network_name(user_network)!r}")
        return user_network
    if name not in registered_networks():
        raise ModelFileError(f"{path!r} names network {name!r}, which is not one of this project's networks; "
                             f"if it is your own, name it on the command line (--network=module:builder)")
    return name


def restore_model(model: Any, opened: ModelFile, env: Any, *, training: bool) -> None:
    """Put a model file's weights, step count and VecNormalize statistics into ``model`` (and ``env``).

    ``model`` offers ``get_arrays``/``set_arrays``, ``num_timesteps`` and ``vec_normalize_state``; only
    the arrays it has are read, each checked against its shape first. The saved statistics go into
    ``env``'s VecNormalize, which keeps adapting them when ``training`` (continued training) and freezes
    them otherwise (evaluation, play).
    """
    metadata, path = opened.metadata, opened.path
    model.set_arrays(opened.read_arrays(like=model.get_arrays()))
    steps = metadata_field(opened, "num_timesteps", int, 0)
    if steps < 0:
        raise ModelFileError(f"{path!r}: metadata field 'num_timesteps' is negative ({steps})")
    model.num_timesteps = steps
    saved = metadata.get("vec_normalize")
    model.vec_normalize_state = None if saved is None else _vec_normalize_state(saved, path)
    if env is None or model.vec_normalize_state is None:
        return
    from common.vec_env import unwrap_vec_normalize

    vec_normalize = unwrap_vec_normalize(env)
    if vec_normalize is None:
        from common.logs import logger

        logger.warn(f"{path}: the model was trained with VecNormalize but the env has none; "
                    "observations will not be normalised")
        return
    try:
        vec_normalize.set_state(model.vec_normalize_state)
    except ValueError as e:
        raise ModelFileError(f"{path!r}: {e}") from None
    vec_normalize.training = training


def _vec_normalize_state(saved: Any, path: str) -> dict[str, np.ndarray]:
    if not isinstance(saved, dict):
        raise ModelFileError(f"{path!r}: metadata field 'vec_normalize' is not an object")
    try:
        state = {str(k): np.asarray(v, np.float64) for k, v in saved.items()}
    except (TypeError, ValueError) as e:
        raise ModelFileError(f"{path!r}: bad VecNormalize statistics ({e})") from None
    if sum(a.size for a in state.values()) > 4 * MAX_SPACE_ELEMENTS:
        raise ModelFileError(f"{path!r}: VecNormalize statistics are larger than any observation space allows")
    return state

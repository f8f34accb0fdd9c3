"""Model files: one zip archive with ``metadata.json`` and one ``<name>.npy`` per array.

Data only, never code: arrays are written and read with ``allow_pickle=False`` and
``np.load(path, allow_pickle=False)`` opens the file too. Writes are atomic (temporary file in the
same folder, then ``os.replace``).
"""
from __future__ import annotations

import io
import json
import os
import platform
import tempfile
import zipfile
from typing import Any

import numpy as np
from gymnasium import spaces

FORMAT_VERSION = 1
METADATA_MEMBER = "metadata.json"


class ModelFileError(Exception):
    """A model file is missing, corrupt, or does not fit the environment."""


# ---------------------------------------------------------------- archive


def save_model_file(path: str, metadata: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write ``metadata`` (JSON-able) and named ``arrays`` to ``path`` atomically."""
    path = os.fspath(path)
    meta = dict(metadata)
    meta.setdefault("format_version", FORMAT_VERSION)
    try:
        meta_text = json.dumps(meta, indent=1, sort_keys=True, allow_nan=True)
    except TypeError as e:
        raise ModelFileError(f"model metadata is not JSON-serialisable: {e}") from None
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".zip", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(METADATA_MEMBER, meta_text)
            for name, arr in arrays.items():
                if name.endswith(".json") or name == "":
                    raise ModelFileError(f"bad array name {name!r}")
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.asarray(arr), allow_pickle=False)
                zf.writestr(name + ".npy", buf.getvalue())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_model_file(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """Read ``(metadata, arrays)`` from a model file; raises ``ModelFileError`` on any problem."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ModelFileError(f"model file {path!r} does not exist")
    try:
        with zipfile.ZipFile(path, "r") as zf:
            names = zf.namelist()
            if METADATA_MEMBER not in names:
                raise ModelFileError(f"{path!r} is not a model file (no {METADATA_MEMBER} inside)")
            metadata = json.loads(zf.read(METADATA_MEMBER).decode("utf-8"))
            arrays = {}
            for name in names:
                if name.endswith(".npy"):
                    arrays[name[:-4]] = np.lib.format.read_array(io.BytesIO(zf.read(name)), allow_pickle=False)
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, zipfile.LargeZipFile) as e:
        raise ModelFileError(f"{path!r} is not a readable model file ({type(e).__name__}: {e})") from None
    version = metadata.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ModelFileError(f"{path!r} has model format version {version!r}; this code reads up to {FORMAT_VERSION}")
    return metadata, arrays


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


# ---------------------------------------------------------------- spaces


def _compact(arr: np.ndarray) -> Any:
    arr = np.asarray(arr)
    if arr.size and np.all(arr == arr.flat[0]):
        return _num(arr.flat[0])
    return [_num(v) for v in arr.ravel()]


def _num(v) -> Any:
    v = v.item() if hasattr(v, "item") else v
    if isinstance(v, float) and not np.isfinite(v):
        return "inf" if v > 0 else ("-inf" if v < 0 else "nan")
    return v


def _uncompact(v, shape, dtype) -> np.ndarray:
    def conv(x):
        return float(x) if isinstance(x, str) else x

    if isinstance(v, list):
        return np.array([conv(x) for x in v], dtype=dtype).reshape(shape)
    return np.full(shape, conv(v), dtype=dtype)


def space_to_json(space: spaces.Space) -> dict:
    """A JSON-friendly description of a gymnasium space (Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple)."""
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": _compact(space.low),
            "high": _compact(space.high),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": np.asarray(space.nvec).tolist(),
            "start": np.asarray(space.start).tolist(),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_json(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    raise ModelFileError(f"cannot describe space {space} in a model file")


def space_from_json(d: dict) -> spaces.Space:
    """The inverse of ``space_to_json``."""
    kind = d.get("type")
    if kind == "Box":
        shape = tuple(d["shape"])
        dtype = np.dtype(d["dtype"])
        return spaces.Box(_uncompact(d["low"], shape, dtype), _uncompact(d["high"], shape, dtype), dtype=dtype)
    if kind == "Discrete":
        return spaces.Discrete(d["n"], start=d.get("start", 0))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(d["nvec"], dtype=d.get("dtype", "int64"), start=d.get("start"))
    if kind == "MultiBinary":
        return spaces.MultiBinary(d["n"])
    if kind == "Dict":
        return spaces.Dict({k: space_from_json(s) for k, s in d["spaces"].items()})
    if kind == "Tuple":
        return spaces.Tuple([space_from_json(s) for s in d["spaces"]])
    raise ModelFileError(f"unknown space type {kind!r} in model file")


def check_spaces(metadata: dict, env) -> None:
    """Raise ``ModelFileError`` when ``env``'s observation/action space differs from the model's."""
    for key, label in (("observation_space", "observation"), ("action_space", "action")):
        saved = metadata.get(key)
        if saved is None:
            continue
        actual = getattr(env, key)
        if space_to_json(actual) != saved:
            raise ModelFileError(
                f"model was trained on {label} space {space_from_json(saved)}, env has {actual}"
            )


# ---------------------------------------------------------------- what every algorithm's model file shares


def network_name(network: Any) -> str:
    """A name for ``network`` that ``common.models.get_network_builder`` resolves again."""
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


def read_model_file(path: str, algorithm: str, env: Any = None) -> tuple[dict, dict[str, np.ndarray]]:
    """``load_model_file`` for a file that must hold an ``algorithm`` model fitting ``env``'s spaces."""
    metadata, arrays = load_model_file(path)
    if metadata.get("algorithm") != algorithm:
        raise ModelFileError(f"{path!r} holds a {metadata.get('algorithm')!r} model, not a {algorithm} model")
    if env is not None:
        check_spaces(metadata, env)
    return metadata, arrays


def restore_model(model: Any, metadata: dict, arrays: dict[str, np.ndarray], env: Any, *, training: bool,
                  path: str) -> None:
    """Put a model file's weights, step count and VecNormalize statistics into ``model`` (and ``env``).

    ``model`` offers ``set_arrays``, ``num_timesteps`` and ``vec_normalize_state``. The saved statistics
    go into ``env``'s VecNormalize, which keeps adapting them when ``training`` (continued training) and
    freezes them otherwise (evaluation, play).
    """
    model.set_arrays(arrays)
    model.num_timesteps = int(metadata.get("num_timesteps", 0))
    saved = metadata.get("vec_normalize")
    model.vec_normalize_state = None if saved is None else {k: np.asarray(v, np.float64) for k, v in saved.items()}
    if env is None or model.vec_normalize_state is None:
        return
    from common.vec_env import unwrap_vec_normalize

    vec_normalize = unwrap_vec_normalize(env)
    if vec_normalize is None:
        from common import logger

        logger.warn(f"{path}: the model was trained with VecNormalize but the env has none; "
                    "observations will not be normalised")
        return
    vec_normalize.set_state(model.vec_normalize_state)
    vec_normalize.training = training

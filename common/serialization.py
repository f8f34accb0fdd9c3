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

from common.errors import UserError

FORMAT_VERSION = 1
METADATA_MEMBER = "metadata.json"


class ModelFileError(UserError):
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


# Limits on what a model file may make this process read or allocate (a file is untrusted input).
MAX_METADATA_BYTES = 16 * 2**20
MAX_ARRAY_BYTES = 2**30  # all arrays read from one file together
MAX_BOX_ELEMENTS = 2**24  # elements of one Box space (its low/high arrays are allocated)
SMALL_SIZE = 64  # a size in metadata above this must be a dimension of some array in the file
METADATA_TYPES = {"algorithm": str, "network": str, "network_kwargs": dict, "observation_space": dict,
                  "action_space": dict}


def _read_metadata(zf: zipfile.ZipFile, path: str) -> dict:
    try:
        info = zf.getinfo(METADATA_MEMBER)
    except KeyError:
        raise ModelFileError(f"{path!r} is not a model file (no {METADATA_MEMBER} inside)") from None
    if info.file_size > MAX_METADATA_BYTES:
        raise ModelFileError(f"{path!r}: {METADATA_MEMBER} declares {info.file_size} bytes "
                             f"(more than {MAX_METADATA_BYTES})")
    with zf.open(info) as f:
        text = f.read(MAX_METADATA_BYTES + 1)
    if len(text) > MAX_METADATA_BYTES:
        raise ModelFileError(f"{path!r}: {METADATA_MEMBER} is larger than {MAX_METADATA_BYTES} bytes")
    try:
        metadata = json.loads(text.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise ModelFileError(f"{path!r}: {METADATA_MEMBER} is not valid JSON ({type(e).__name__})") from None
    if not isinstance(metadata, dict):
        raise ModelFileError(f"{path!r}: {METADATA_MEMBER} holds a {type(metadata).__name__}, not an object")
    version = metadata.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ModelFileError(f"{path!r} has model format version {version!r}; this code reads up to {FORMAT_VERSION}")
    return metadata


class ModelFile:
    """An opened model file: its checked metadata, the shapes of its arrays, and bounded array reads.

    Only ``metadata.json`` and the headers of the ``.npy`` members are read on opening; array data is
    read by ``read_arrays`` for the names the model asks for, after checking each header's shape and
    dtype against the model's own array, so a crafted file cannot make the loader allocate more than
    the model it describes.
    """

    def __init__(self, path: str) -> None:
        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise ModelFileError(f"model file {self.path!r} does not exist")
        try:
            with zipfile.ZipFile(self.path, "r") as zf:
                self.metadata = _read_metadata(zf, self.path)
                self.headers = {info.filename[:-4]: self._header(zf, info)
                                for info in zf.infolist() if info.filename.endswith(".npy")}
        except ModelFileError:
            raise
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, zipfile.LargeZipFile) as e:
            raise ModelFileError(f"{self.path!r} is not a readable model file ({type(e).__name__}: {e})") from None

    def _header(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple[int, ...], np.dtype]:
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read_header(f)  # the header only (numpy bounds its size), no data
        if dtype.hasobject:
            raise ModelFileError(f"{self.path!r}: array {info.filename!r} holds Python objects; refused")
        return tuple(int(d) for d in shape), dtype

    def dimensions(self) -> set[int]:
        """Every dimension of every array in the file (what metadata sizes must be backed by)."""
        return {d for shape, _ in self.headers.values() for d in shape}

    def read_arrays(self, like: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """The arrays named in ``like`` that the file holds (all arrays when None), each checked first
        to have ``like``'s shape; at most ``MAX_ARRAY_BYTES`` in all."""
        names = list(self.headers) if like is None else [n for n in like if n in self.headers]
        total = 0
        for name in names:
            shape, dtype = self.headers[name]
            if like is not None and shape != tuple(np.shape(like[name])):
                raise ModelFileError(f"{self.path!r}: array {name!r} has shape {shape}, the model needs "
                                     f"{tuple(np.shape(like[name]))}; the file does not fit this model")
            total += int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
            if total > MAX_ARRAY_BYTES:
                raise ModelFileError(f"{self.path!r}: its arrays need more than {MAX_ARRAY_BYTES} bytes; refused")
        out = {}
        try:
            with zipfile.ZipFile(self.path, "r") as zf:
                for name in names:
                    with zf.open(name + ".npy") as f:
                        out[name] = np.lib.format.read_array(f, allow_pickle=False)
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
            raise ModelFileError(f"{self.path!r} is not a readable model file ({type(e).__name__}: {e})") from None
        return out


def load_model_file(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """Read ``(metadata, arrays)`` from a model file (all arrays, bounded); ``ModelFileError`` on any problem."""
    opened = ModelFile(path)
    return opened.metadata, opened.read_arrays()


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
    """The inverse of ``space_to_json``, for untrusted input: a malformed or oversized description
    raises ``ModelFileError`` (a Box may hold at most ``MAX_BOX_ELEMENTS`` elements)."""
    try:
        return _space_from_json(d)
    except ModelFileError:
        raise
    except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as e:
        raise ModelFileError(f"malformed space in model file ({type(e).__name__}: {e})") from None


def _space_from_json(d: dict) -> spaces.Space:
    kind = d.get("type")
    if kind == "Box":
        shape = tuple(int(n) for n in d["shape"])
        dtype = np.dtype(d["dtype"])
        if dtype.kind not in "biuf" or any(n < 0 for n in shape):
            raise ModelFileError(f"bad Box space in model file: shape {shape}, dtype {dtype}")
        if int(np.prod(shape, dtype=np.float64)) > MAX_BOX_ELEMENTS:
            raise ModelFileError(f"Box space of shape {shape} in model file has more than {MAX_BOX_ELEMENTS} elements")
        return spaces.Box(_uncompact(d["low"], shape, dtype), _uncompact(d["high"], shape, dtype), dtype=dtype)
    if kind == "Discrete":
        return spaces.Discrete(_size(d["n"]), start=int(d.get("start", 0)))
    if kind == "MultiDiscrete":
        nvec = np.asarray(d["nvec"], np.int64)
        _size(int(nvec.sum()))
        return spaces.MultiDiscrete(nvec, dtype=d.get("dtype", "int64"), start=d.get("start"))
    if kind == "MultiBinary":
        n = np.asarray(d["n"], np.int64)
        _size(int(np.prod(n)))
        return spaces.MultiBinary(n.tolist())
    if kind == "Dict":
        return spaces.Dict({str(k): _space_from_json(s) for k, s in d["spaces"].items()})
    if kind == "Tuple":
        return spaces.Tuple([_space_from_json(s) for s in d["spaces"]])
    raise ModelFileError(f"unknown space type {kind!r} in model file")


def _size(n: Any) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or not 0 < n <= MAX_BOX_ELEMENTS:
        raise ModelFileError(f"bad space size {n!r} in model file")
    return n


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
    if env is not None:
        check_spaces(metadata, env)
    return opened


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
    from common.models import get_network_builder, registered_networks

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
    steps = metadata.get("num_timesteps", 0)
    model.num_timesteps = steps if isinstance(steps, int) and steps >= 0 else 0
    saved = metadata.get("vec_normalize")
    model.vec_normalize_state = None if saved is None else _vec_normalize_state(saved, path)
    if env is None or model.vec_normalize_state is None:
        return
    from common.vec_env import unwrap_vec_normalize

    vec_normalize = unwrap_vec_normalize(env)
    if vec_normalize is None:
        from common import logger

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
    if sum(a.size for a in state.values()) > 4 * MAX_BOX_ELEMENTS:
        raise ModelFileError(f"{path!r}: VecNormalize statistics are larger than any observation space allows")
    return state

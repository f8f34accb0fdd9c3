"""gymnasium spaces as JSON (in model files): ``space_to_json``, ``space_from_json`` for untrusted input,
and ``check_spaces`` of a model file's metadata against an env."""
from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from common.model_file import ModelFileError

MAX_BOX_ELEMENTS = 2**24  # elements of one Box space (its low/high arrays are allocated)


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

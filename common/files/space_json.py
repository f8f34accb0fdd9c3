"""gymnasium spaces as JSON (in model files): ``space_to_json``, ``space_from_json`` for untrusted input,
``space_size`` (what a description asks for, read from the JSON alone, bounded) and ``check_spaces`` of a
model file's metadata against an env."""
from __future__ import annotations

import reprlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from common.files.model_file import ModelFileError, is_plain_dtype

MAX_SPACE_ELEMENTS = 2**24  # elements of one space, all its parts together; also its widest encoding
MAX_SPACE_PARTS = 1024  # spaces inside one space (Dict keys, Tuple items, nested ones too)
MAX_SPACE_DEPTH = 8  # nesting of Dict/Tuple spaces
MAX_NDIM = 32  # dimensions of a Box or MultiBinary shape


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
    def conv(x: float | str) -> float:
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
    (``space_size``) raises ``ModelFileError`` before anything is allocated."""
    space_size(d)
    try:
        return _space_from_json(d)
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise ModelFileError(f"malformed space in model file ({type(e).__name__}: {e})") from None


def _space_from_json(d: dict) -> spaces.Space:
    kind = d["type"]
    if kind == "Box":
        shape, dtype = tuple(d["shape"]), np.dtype(d["dtype"])
        return spaces.Box(_uncompact(d["low"], shape, dtype), _uncompact(d["high"], shape, dtype), dtype=dtype)
    if kind == "Discrete":
        return spaces.Discrete(d["n"], start=d.get("start", 0))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(np.asarray(d["nvec"], np.int64), dtype=d.get("dtype", "int64"), start=d.get("start"))
    if kind == "MultiBinary":
        return spaces.MultiBinary(d["n"])
    if kind == "Dict":
        return spaces.Dict({k: _space_from_json(s) for k, s in d["spaces"].items()})
    return spaces.Tuple([_space_from_json(s) for s in d["spaces"]])


@dataclass
class SpaceSize:
    """What a space description asks for: ``elements`` (of all its arrays: Box cells, MultiDiscrete and
    MultiBinary entries, one per Discrete), ``width`` (its flat encoding: Discrete and MultiDiscrete one-hot,
    Box and MultiBinary flattened; a network's input or output width), ``dense_width`` (the part of ``width``
    outside image-shaped Boxes (2 or 3 dimensions), which a convolutional network may take instead of a
    dense layer) and ``parts`` (spaces inside it)."""

    elements: int = 0
    width: int = 0
    dense_width: int = 0
    parts: int = 0

    def add(self, other: SpaceSize) -> None:
        """Add ``other``'s sizes (a part of this space) to this one's."""
        self.elements += other.elements
        self.width += other.width
        self.dense_width += other.dense_width
        self.parts += other.parts + 1


def space_size(d: Any, where: str = "space") -> SpaceSize:
    """The sizes a space description (JSON, untrusted) asks for, read from the JSON alone; ``ModelFileError``
    for a malformed description or one above the bounds (``MAX_SPACE_ELEMENTS`` elements and encoding width
    in all, ``MAX_SPACE_PARTS`` parts, ``MAX_SPACE_DEPTH`` levels)."""
    return _bounded(_size_of(d, where, 0), where)


def _bounded(size: SpaceSize, where: str) -> SpaceSize:
    if max(size.elements, size.width) > MAX_SPACE_ELEMENTS:
        raise ModelFileError(f"{where} in model file asks for {max(size.elements, size.width)} elements in all, "
                             f"more than {MAX_SPACE_ELEMENTS}")
    if size.parts > MAX_SPACE_PARTS:
        raise ModelFileError(f"{where} in model file has more than {MAX_SPACE_PARTS} parts")
    return size


def _size_of(d: Any, where: str, depth: int) -> SpaceSize:
    kind = d.get("type") if isinstance(d, dict) else None
    if kind in ("Dict", "Tuple"):
        return _container_size(d, where, depth)
    if kind == "Box":
        shape = _shape(d.get("shape"), where, allow_zero=True)
        if not (isinstance(d.get("dtype"), str) and is_plain_dtype(_dtype(d["dtype"], where))):
            raise _malformed(where, f"Box dtype {d.get('dtype')!r}")
        n = _product(shape, where)
        return SpaceSize(n, n, 0 if len(shape) in (2, 3) else n)
    if kind == "Discrete":
        n, start = _count(d.get("n"), where), d.get("start", 0)
        if not _is_int(start) or abs(start) >= 2**62:
            raise _malformed(where, f"Discrete start {_short(start)}")
        return SpaceSize(1, n, n)
    if kind == "MultiDiscrete":
        nvec = _int_array(d.get("nvec"), where)
        if not isinstance(d.get("dtype", "int64"), str) or _dtype(d.get("dtype", "int64"), where).kind not in "iu":
            raise _malformed(where, f"MultiDiscrete dtype {d.get('dtype')!r}")
        if nvec.size == 0 or nvec.min() < 1 or nvec.max() > MAX_SPACE_ELEMENTS:
            raise _malformed(where, f"MultiDiscrete sizes must be in 1..{MAX_SPACE_ELEMENTS}")
        return SpaceSize(nvec.size, int(nvec.sum()), int(nvec.sum()))
    if kind == "MultiBinary":
        n = d.get("n")
        n = _product(_shape(n if isinstance(n, list) else [n], where, allow_zero=False), where)
        return SpaceSize(n, n, n)
    raise _malformed(where, f"unknown space type {_short(kind)}")


def _container_size(d: dict, where: str, depth: int) -> SpaceSize:
    parts = d.get("spaces")
    if d["type"] == "Dict" and isinstance(parts, dict) and all(isinstance(k, str) for k in parts):
        parts = list(parts.values())
    elif d["type"] != "Tuple" or not isinstance(parts, list):
        raise _malformed(where, f"{d['type']} without its spaces")
    if depth >= MAX_SPACE_DEPTH:
        raise ModelFileError(f"{where} in model file nests spaces more than {MAX_SPACE_DEPTH} deep")
    size = SpaceSize()
    for part in parts:
        _bounded(size, where).add(_size_of(part, where, depth + 1))
    return size


def _malformed(where: str, detail: str) -> ModelFileError:
    return ModelFileError(f"malformed space in {where} of model file: {detail}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _count(n: Any, where: str, bound: int = MAX_SPACE_ELEMENTS) -> int:
    if not _is_int(n) or not 0 < n <= bound:
        raise _malformed(where, f"size {_short(n)} is not in 1..{bound}")
    return n


def _shape(shape: Any, where: str, allow_zero: bool) -> list[int]:
    if not isinstance(shape, list) or len(shape) > MAX_NDIM:
        raise _malformed(where, f"shape {_short(shape)}")
    low = 0 if allow_zero else 1
    if not all(_is_int(n) and n >= low for n in shape):
        raise _malformed(where, f"shape {_short(shape)}")
    return shape


def _product(shape: list[int], where: str) -> int:
    n = 1
    for d in shape:  # stop as soon as the bound is passed
        n *= d
        if n > MAX_SPACE_ELEMENTS:
            raise ModelFileError(f"space of shape {_short(shape)} in {where} of model file has more than "
                                 f"{MAX_SPACE_ELEMENTS} elements")
    return n


def _dtype(name: str, where: str) -> np.dtype:
    try:
        return np.dtype(name)
    except (TypeError, ValueError) as e:
        raise _malformed(where, f"dtype {name[:40]!r} ({e})") from None


def _int_array(value: Any, where: str) -> np.ndarray:
    if not isinstance(value, list) or len(value) > MAX_SPACE_ELEMENTS:
        raise _malformed(where, f"sizes {_short(value)}")
    try:
        arr = np.asarray(value)
    except (ValueError, OverflowError):
        arr = np.asarray([])  # ragged
    if arr.dtype.kind != "i" or arr.ndim > MAX_NDIM:
        raise _malformed(where, f"sizes {_short(value)}")
    return arr


def describe_space_json(d: Any, limit: int = 200) -> str:
    """A short description of a space from its JSON, without building it (at most ``limit`` characters)."""
    text = _describe(d, limit, 0)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(d: Any, limit: int, depth: int) -> str:
    if not isinstance(d, dict) or depth > MAX_SPACE_DEPTH:
        return _short(d)
    kind = d.get("type")
    if kind == "Box":
        return f"Box(shape {_short(d.get('shape'))}, {_short(d.get('dtype'))}, low {_short(d.get('low'))}, " \
               f"high {_short(d.get('high'))})"
    if kind in ("Discrete", "MultiBinary"):
        start = d.get("start", 0)
        return f"{kind}({_short(d.get('n'))}" + (f", start {_short(start)})" if start else ")")
    if kind == "MultiDiscrete":
        return f"MultiDiscrete({_short(d.get('nvec'))})"
    parts, text = d.get("spaces"), ""
    items = parts.items() if isinstance(parts, dict) else enumerate(parts if isinstance(parts, list) else [])
    for key, part in items:
        if len(text) > limit:
            break
        text += (", " if text else "") + (f"{key!r}: " if isinstance(parts, dict) else "") + _describe(part, limit, depth + 1)
    return f"{_short(kind)}({text})"


def _short(v: Any) -> str:
    text = v if isinstance(v, str) else reprlib.repr(v)  # a few items of a list, never all of them
    return text if len(text) <= 40 else text[:37] + "..."


def check_spaces(metadata: dict, env: Any) -> None:
    """Raise ``ModelFileError`` when ``env``'s observation/action space differs from the model's; the
    message describes the file's space from its JSON."""
    for key, label in (("observation_space", "observation"), ("action_space", "action")):
        saved = metadata.get(key)
        if saved is None:
            continue
        actual = getattr(env, key)
        if space_to_json(actual) != saved:
            raise ModelFileError(f"model was trained on {label} space {describe_space_json(saved)}, "
                                 f"env has {describe_space_json(space_to_json(actual))}")

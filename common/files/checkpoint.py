"""Training-state checkpoints: one zip per rank and step, ``<log dir>/resume/<step>-rank<r>.zip``.

The archive is a model file (``common.files.model_file``: ``metadata.json`` plus ``<name>.npy`` members, data
only) with the rest of the training state beside the model's arrays: the metadata's ``training_state``
holds each component's JSON part, in which every numpy array is a reference ``{"__array__": name}`` to a
member ``_state/<name>.npy``. Arrays are streamed into the archive one chunk at a time (no second copy of
a replay buffer in memory); the write is atomic (temporary file, fsync, rename, fsync of the folder) and
the newest ``KEEP`` checkpoints of a rank are kept.

Reading is bounded like model files: an array is read only into the place the live run already has for
it (same name, shape and dtype), so a crafted file cannot make the reader allocate more than the run.
A component is any object with ``state() -> dict`` (JSON-able values and numpy arrays, nested in dicts
and lists) and ``load_state(state)``; ``FilledRows`` in a state saves only the filled rows of a live
array (a replay buffer up to its fill level), read back into the live array's first rows.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import time
import zipfile
from typing import Any, Protocol

import numpy as np

from common.files.model_file import (
    FORMAT_VERSION,
    METADATA_MEMBER,
    TEMP_PREFIX,
    ModelFile,
    ModelFileError,
    first_non_finite,
)

KEEP = 2  # newest checkpoints kept per rank
FOLDER = "resume"  # inside the log folder
KIND = "training_state"
STATE_PREFIX = "_state/"
NAME = re.compile(r"(\d{10})-rank(\d+)\.zip")
_READ_CHUNK = 16 * 2**20


class CheckpointError(ModelFileError):
    """No usable checkpoint, or one that does not belong to this run (one line, exit 2)."""


class Stateful(Protocol):
    """What a checkpoint holds of a component: ``state()`` and ``load_state(state)``."""

    def state(self) -> dict[str, Any]: ...

    def load_state(self, state: dict[str, Any]) -> None: ...


def checkpoint_path(folder: str, step: int, rank: int) -> str:
    """``<folder>/<step>-rank<rank>.zip``."""
    return os.path.join(folder, f"{int(step):010d}-rank{int(rank)}.zip")


def checkpoints(folder: str, rank: int) -> list[tuple[int, str]]:
    """``(step, path)`` of the checkpoints of ``rank`` in ``folder``, newest first."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = [(int(m.group(1)), os.path.join(folder, n)) for n in names
             if (m := NAME.fullmatch(n)) and int(m.group(2)) == rank]
    return sorted(found, reverse=True)


# ---------------------------------------------------------------------------------------------------
# nested state <-> JSON + named arrays


class FilledRows:
    """In a component's state: the first ``rows`` rows of the live ``array`` (a buffer's filled part).
    Written as those rows; read back into the first rows of the live array, which ``load_state`` gets."""

    def __init__(self, array: np.ndarray, rows: int) -> None:
        self.array, self.rows = array, int(rows)


def split_arrays(value: Any, arrays: dict[str, np.ndarray], path: str, filled: set[str] | None = None) -> Any:
    """``value`` with every numpy array (and numpy scalar) replaced by a reference into ``arrays``;
    ``FilledRows`` give their rows, or with ``filled`` (reading) the whole live array to read into, their
    paths added to ``filled``."""
    if isinstance(value, FilledRows):
        arrays[path] = value.array if filled is not None else value.array[: value.rows]
        if filled is not None:
            filled.add(path)
        return {"__array__": path}
    if isinstance(value, np.ndarray):
        arrays[path] = value
        return {"__array__": path}
    if isinstance(value, np.generic):
        arrays[path] = np.asarray(value)
        return {"__scalar__": path}
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str) or key.startswith("__"):
                raise TypeError(f"state key {key!r} at {path!r}: keys must be strings not starting with '__'")
        return {k: split_arrays(v, arrays, f"{path}/{k}", filled) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [split_arrays(v, arrays, f"{path}/{i}", filled) for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"state at {path!r} holds a {type(value).__name__}; use JSON values and numpy arrays")


def join_arrays(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """The inverse of ``split_arrays`` (a reference to an array the file lacks raises KeyError)."""
    if isinstance(value, dict):
        if set(value) == {"__array__"}:
            return arrays[value["__array__"]]
        if set(value) == {"__scalar__"}:
            return arrays[value["__scalar__"]][()]
        return {k: join_arrays(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [join_arrays(v, arrays) for v in value]
    return value


# ---------------------------------------------------------------------------------------------------
# writing


def write_checkpoint(path: str, metadata: dict, model_arrays: dict[str, np.ndarray],
                     state: dict[str, Any]) -> float:
    """Write ``metadata``, the model's arrays and the components' ``state`` (name -> nested state) to
    ``path`` atomically; returns the seconds it took."""
    t0 = time.perf_counter()
    arrays: dict[str, np.ndarray] = {}
    meta = {**metadata, "format_version": FORMAT_VERSION, "kind": KIND,
            "training_state": {name: split_arrays(v, arrays, name) for name, v in state.items()}}
    text = json.dumps(meta, sort_keys=True, allow_nan=True)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", suffix=".zip", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                zf.writestr(METADATA_MEMBER, text)
                for name, array in [*model_arrays.items(), *((STATE_PREFIX + k, v) for k, v in arrays.items())]:
                    _write_member(zf, name + ".npy", np.asarray(array))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_folder(folder)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return time.perf_counter() - t0


def _write_member(zf: zipfile.ZipFile, name: str, array: np.ndarray) -> None:
    """Stream one array into the archive: numpy writes a non-file target in bounded chunks."""
    with zf.open(name, "w", force_zip64=array.nbytes > 2**30) as member:
        np.lib.format.write_array(member, array, allow_pickle=False)


def _fsync_folder(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_old(folder: str, rank: int, keep: int = KEEP, written: int | None = None) -> None:
    """Remove all but the newest ``keep`` checkpoints of ``rank``. With ``written`` (the step of the
    checkpoint just written) the newest are counted from it, and those of later steps, another run's in a
    shared folder, are removed too."""
    found = checkpoints(folder, rank)
    stale = [] if written is None else [item for item in found if item[0] > written]
    for _, path in stale + [item for item in found if item not in stale][keep:]:
        try:
            os.unlink(path)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------------
# reading


def open_checkpoint(path: str) -> ModelFile:
    """Open a checkpoint and check every member's CRC; ``CheckpointError`` for anything unreadable."""
    try:
        opened = ModelFile(path)
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
    except ModelFileError as e:
        raise CheckpointError(str(e)) from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise CheckpointError(f"{path!r} is not a readable checkpoint ({type(e).__name__}: {e})") from None
    if bad is not None:
        raise CheckpointError(f"{path!r} is corrupt (member {bad!r} fails its checksum)")
    if opened.metadata.get("kind") != KIND or not isinstance(opened.metadata.get("training_state"), dict):
        raise CheckpointError(f"{path!r} is a model file, not a training-state checkpoint")
    step = opened.metadata.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f"{path!r} has step {step!r}, not a whole number of env steps >= 0")
    return opened


def newest_usable(folder: str, rank: int) -> tuple[ModelFile, list[str]]:
    """The newest checkpoint of ``rank`` in ``folder`` that opens, and one note per newer one that did not
    (corrupt: the run falls back to the previous checkpoint). ``CheckpointError`` when none is usable."""
    found = checkpoints(folder, rank)
    if not found:
        raise CheckpointError(f"no checkpoint in {folder} (runs write them every --checkpoint_freq env steps "
                              "and at the end)")
    notes = []
    for _, path in found:
        try:
            return open_checkpoint(path), notes
        except CheckpointError as e:
            notes.append(str(e))
    raise CheckpointError(f"no usable checkpoint in {folder}: {notes[0]}" + (
        f" (and {len(notes) - 1} older one(s) unusable too)" if len(notes) > 1 else ""))


def read_state(opened: ModelFile, model_arrays: dict[str, np.ndarray],
               components: dict[str, Stateful]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The model's arrays and each component's state from a checkpoint.

    ``model_arrays`` (the live model's) and the components' current ``state()`` are the templates: each
    array of the file must have a template of the same name, shape and dtype, and is read into a fresh
    copy of it (into the template itself when the component's state is its live storage)."""
    path, saved = opened.path, opened.metadata["training_state"]
    targets = {name: _writable_copy(a) for name, a in model_arrays.items()}
    templates: dict[str, Any] = {}
    live: dict[str, np.ndarray] = {}
    filled: set[str] = set()
    for name, component in components.items():
        if name not in saved:
            raise CheckpointError(f"{path!r} holds no state for {name!r}; it was written by another kind of run")
        templates[name] = split_arrays(component.state(), live, name, filled)
    seen: set[int] = set()  # an array two names share is read into a copy for the second (no overwrite)
    for k, v in live.items():
        in_place = v.flags.writeable and v.flags.c_contiguous and id(v) not in seen
        seen.add(id(v))
        targets[STATE_PREFIX + k] = v if in_place else _writable_copy(v)
    wanted = set(model_arrays) | {STATE_PREFIX + k for k in _references(saved, set(templates))}
    try:
        with zipfile.ZipFile(path) as zf:
            for name in sorted(wanted):
                if name not in targets:
                    raise CheckpointError(f"{path!r}: array {name!r} does not fit this run")
                try:
                    with zf.open(name + ".npy") as f:
                        _read_into(f, targets[name], path, name, name[len(STATE_PREFIX):] in filled)
                except KeyError:
                    raise CheckpointError(f"{path!r} lacks array {name!r}; it does not fit this run") from None
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise CheckpointError(f"{path!r} is not a readable checkpoint ({type(e).__name__}: {e})") from None
    bad = first_non_finite({k: targets[k] for k in model_arrays})
    if bad is not None:
        raise CheckpointError(f"{path!r}: array {bad!r} holds NaN or infinity (a diverged model); refused")
    state_arrays = {k[len(STATE_PREFIX):]: v for k, v in targets.items() if k.startswith(STATE_PREFIX)}
    try:
        states = {name: join_arrays(saved[name], state_arrays) for name in templates}
    except (KeyError, TypeError, IndexError) as e:
        raise CheckpointError(f"{path!r}: training state does not fit this run ({e})") from None
    return {k: targets[k] for k in model_arrays}, states


def _references(saved: dict, names: set[str]) -> set[str]:
    """Array names referenced by the saved states of ``names``."""
    out: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            ref = v.get("__array__", v.get("__scalar__")) if len(v) == 1 else None
            if isinstance(ref, str):
                out.add(ref)
            else:
                for item in v.values():
                    walk(item)
        elif isinstance(v, list):
            for item in v:
                walk(item)

    for name in names:
        walk(saved[name])
    return out


def _writable_copy(a: np.ndarray) -> np.ndarray:
    return np.array(a, copy=True, order="C")


def _read_into(f: Any, target: np.ndarray, path: str, name: str, fewer_rows: bool) -> None:
    """Read one ``.npy`` member into ``target`` after checking its header against it: the same shape, or
    with ``fewer_rows`` (``FilledRows``) at most as many rows, read into the first rows."""
    version = np.lib.format.read_magic(f)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read_header(f)
    shape = tuple(shape)
    if fewer_rows and len(shape) == target.ndim >= 1 and shape[1:] == target.shape[1:] and shape[0] < target.shape[0]:
        target = target[: shape[0]]
    if dtype.hasobject or fortran or shape != target.shape or dtype != target.dtype:
        raise CheckpointError(f"{path!r}: array {name!r} is {dtype}{list(shape)}, this run has "
                              f"{target.dtype}{list(target.shape)}; the checkpoint does not fit this run")
    view = memoryview(target.reshape(-1).view(np.uint8)) if target.size else memoryview(b"")
    done = 0
    while done < len(view):
        n = f.readinto(view[done: done + _READ_CHUNK])
        if not n:
            raise CheckpointError(f"{path!r}: array {name!r} is truncated")
        done += n


# ---------------------------------------------------------------------------------------------------
# adapters for what loops hold


class GeneratorState:
    """A numpy ``Generator`` as a checkpoint component (its bit generator's state, JSON-able)."""

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator = generator

    def state(self) -> dict[str, Any]:
        """The bit generator's state dict."""
        return self.generator.bit_generator.state

    def load_state(self, state: dict[str, Any]) -> None:
        """Set the bit generator's state (numpy refuses one of another kind of generator)."""
        self.generator.bit_generator.state = state


class Values:
    """A loop's own variables (counters, the current observation) as attributes, as a checkpoint component.
    ``load_state`` keeps each attribute's kind: an int stays an int, an array keeps its shape."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def state(self) -> dict[str, Any]:
        """The attributes."""
        return dict(vars(self))

    def load_state(self, state: dict[str, Any]) -> None:
        """Set every attribute from ``state`` (ValueError when one has another kind)."""
        for name, old in list(vars(self).items()):
            new = state[name]
            if isinstance(old, (bool, int, float)) and not isinstance(new, (bool, int, float)):
                raise TypeError(f"loop value {name!r} is a {type(new).__name__}, not a number")
            setattr(self, name, type(old)(new) if isinstance(old, (bool, int, float)) else new)

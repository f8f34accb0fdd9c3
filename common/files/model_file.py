"""Model files: one zip archive with ``metadata.json`` and one ``<name>.npy`` per array.

Data only, never code: arrays are written and read with ``allow_pickle=False`` and
``np.load(path, allow_pickle=False)`` opens the file too. Writes are atomic (temporary file in the
same folder, then ``os.replace``); the temporary files of writers that died (kill -9) are removed by
the next write in that folder. A file is untrusted input: ``ModelFile`` reads it within bounds.
"""
from __future__ import annotations

import io
import json
import os
import stat
import tempfile
import time
import zipfile

import numpy as np

from common.errors import UserError

FORMAT_VERSION = 1
METADATA_MEMBER = "metadata.json"


class ModelFileError(UserError):
    """A model file is missing, corrupt, or does not fit the environment."""


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
    if is_special_file(path):
        raise ModelFileError(f"{path} exists and is not a regular file (a link or a device): not replaced")
    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", suffix=".zip", dir=folder)
    os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a model file gets the usual permissions
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
    remove_stale_temp_files(folder)


TEMP_PREFIX = ".tmp-"
STALE_AFTER_S = 60.0


def remove_stale_temp_files(folder: str) -> list[str]:
    """Remove the temporary files that writers which died mid-write left in ``folder``: ``.tmp-<pid>-*.zip``
    whose process is not running here (or ``.tmp-*.zip`` without a pid) and that nobody touched for
    ``STALE_AFTER_S`` seconds (a writer on another host sharing the folder is still writing). Returns
    the paths removed."""
    removed = []
    now = time.time()
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        if not (name.startswith(TEMP_PREFIX) and name.endswith(".zip")):
            continue
        path = os.path.join(folder, name)
        pid = name[len(TEMP_PREFIX):].split("-", 1)[0]
        try:
            if now - os.lstat(path).st_mtime < STALE_AFTER_S or (pid.isdigit() and int(pid) > 0 and _running(int(pid))):
                continue
            os.unlink(path)
            removed.append(path)
        except OSError:
            continue
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def is_special_file(path: str) -> bool:
    """Whether something other than a regular file (a link, a device, a fifo) is at ``path``: a model
    file is never written over it."""
    return special_file_kind(path, follow_links=False) is not None


def special_file_kind(path: str, follow_links: bool = True) -> str | None:
    """What is at ``path`` when it is not a regular file ("a folder", "a FIFO (named pipe)", "a character
    device", ...; "a symbolic link" when ``follow_links`` is False); None for a regular file or nothing."""
    try:
        mode = (os.stat if follow_links else os.lstat)(path).st_mode
    except (OSError, ValueError):  # nothing there (or nothing that can be seen)
        return None
    return mode_kind(mode)


def mode_kind(mode: int) -> str | None:
    """The kind of file of an ``st_mode`` when it is not a regular file (see ``special_file_kind``)."""
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Limits on what a model file may make this process read or allocate (a file is untrusted input).
MAX_METADATA_BYTES = 16 * 2**20
MAX_ARRAY_BYTES = 2**30  # all arrays read from one file together
# Bytes one stored byte can hold once decompressed: an array's declared size must fit its member's
# compressed size (deflate expands at most 1032 times), so the arrays' shapes are backed by the file.
MAX_EXPANSION = {zipfile.ZIP_STORED: 1, zipfile.ZIP_DEFLATED: 1032}


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
    if type(version) is not int or not 1 <= version <= FORMAT_VERSION:
        raise ModelFileError(f"{path!r} has model format version {version!r}; this code reads up to {FORMAT_VERSION}")
    return metadata


class ModelFile:
    """An opened model file: its checked metadata, the shapes of its arrays, and bounded array reads.

    Only ``metadata.json`` and the headers of the ``.npy`` members are read on opening (each header's
    size must fit its member's stored bytes, so the shapes are backed by the file); array data is read by
    ``read_arrays`` for the names the model asks for, after checking each header's shape against the
    model's own array and its dtype (plain numeric), so a crafted file cannot make the loader allocate
    more than the model it describes.
    """

    def __init__(self, path: str) -> None:
        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise ModelFileError(f"model file {self.path!r} does not exist")
        try:
            with zipfile.ZipFile(self.path, "r") as zf:
                self._check_member_sizes(zf)
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
        shape = tuple(int(d) for d in shape)
        declared = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
        if declared > MAX_EXPANSION[info.compress_type] * info.compress_size + 1024:
            raise ModelFileError(f"{self.path!r}: array {info.filename!r} declares shape {shape} ({declared} bytes), "
                                 f"more than its {info.compress_size} stored bytes can hold; refused")
        return shape, dtype

    def _check_member_sizes(self, zf: zipfile.ZipFile) -> None:
        """Refuse members of another compression than stored/deflate, or claiming more stored bytes than
        the file has (members sharing their data)."""
        infos = zf.infolist()
        odd = next((i.filename for i in infos if i.compress_type not in MAX_EXPANSION), None)
        if odd is not None:
            raise ModelFileError(f"{self.path!r}: member {odd!r} uses a compression model files do not use; refused")
        if sum(i.compress_size for i in infos) > os.path.getsize(self.path):
            raise ModelFileError(f"{self.path!r}: its members claim more bytes than the file has; refused")

    def dimensions(self) -> set[int]:
        """Every dimension of every array in the file (what metadata sizes must be backed by)."""
        return {d for shape, _ in self.headers.values() for d in shape}

    def elements(self) -> int:
        """The elements of all arrays in the file together."""
        return sum(int(np.prod(shape, dtype=np.float64)) for shape, _ in self.headers.values())

    def read_arrays(self, like: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """The arrays named in ``like`` that the file holds (all arrays when None), each checked first
        to have ``like``'s shape and a plain numeric dtype; at most ``MAX_ARRAY_BYTES`` in all. Float arrays
        must be finite (a model file never holds a diverged model)."""
        names = list(self.headers) if like is None else [n for n in like if n in self.headers]
        total = 0
        for name in names:
            shape, dtype = self.headers[name]
            if not is_plain_dtype(dtype):
                raise ModelFileError(f"{self.path!r}: array {name!r} has dtype {dtype.str}; model files hold bool, "
                                     "int, uint or float16/32/64 arrays in little-endian order")
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
        bad = first_non_finite(out)
        if bad is not None:
            raise ModelFileError(f"{self.path!r}: array {bad!r} holds NaN or infinity (a diverged model); refused")
        return out


def is_plain_dtype(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is bool, int, uint or float16/32/64 in native (little-endian) byte order."""
    return (dtype.kind in "biuf" and dtype.isnative and dtype.fields is None and dtype.subdtype is None
            and (dtype.kind != "f" or dtype.itemsize in (2, 4, 8)))


def first_non_finite(arrays: dict[str, np.ndarray]) -> str | None:
    """The name of the first float array holding NaN or infinity, or None."""
    for name, array in arrays.items():
        a = np.asarray(array)
        if np.issubdtype(a.dtype, np.floating) and not np.all(np.isfinite(a)):
            return name
    return None


def load_model_file(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """Read ``(metadata, arrays)`` from a model file (all arrays, bounded); ``ModelFileError`` on any problem."""
    opened = ModelFile(path)
    return opened.metadata, opened.read_arrays()

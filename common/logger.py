"""Key/value and text logging in the style of OpenAI baselines.

Module API: ``configure``, ``logkv``, ``logkv_mean``, ``dumpkvs``, ``log``, ``info/warn/error``,
``get_dir``, ``get_current``, ``scoped_configure``. Outputs ("format strings"): ``stdout`` (a table),
``log`` (log.txt), ``csv`` (progress.csv), ``json`` (progress.json, one object per line) and
``tensorboard`` (event files; imports TensorFlow only when chosen). Under MPI only rank 0 writes
unless ``all_ranks=True``; values logged with ``logkv_mean`` are averaged over ranks at dump time.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import json
import os
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from typing import IO, Any

from common import mpi_util
from common.log_keys import TOTAL_TIMESTEPS

DEBUG, INFO, WARN, ERROR, DISABLED = 10, 20, 30, 40, 50
DEFAULT_FORMATS = ("stdout", "log", "csv")
KNOWN_FORMATS = ("stdout", "log", "csv", "json", "tensorboard")


def _to_builtin(value: Any) -> Any:
    """Plain Python value for numpy scalars (JSON and CSV friendly)."""
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    return value


class OutputFormat:
    """One destination for key/value dumps and (optionally) free text."""

    def writekvs(self, kvs: dict[str, Any]) -> None:
        """Write one dump of key/values."""

    def writeseq(self, seq: tuple[str, ...]) -> None:
        """Write free text (only human-readable outputs implement it)."""

    def close(self) -> None:
        """Release the file."""


class HumanOutputFormat(OutputFormat):
    """A two-column table per dump, and plain lines for ``log()``; to a stream or a file."""

    def __init__(self, target: str | IO[str] | None = None) -> None:
        """``target``: a file path, an open stream, or None for whatever ``sys.stdout`` is at write time
        (so a logger outlives a redirected or replaced stdout, as under pytest or in a notebook)."""
        self._stream: IO[str] | None = None
        if isinstance(target, str):
            self._stream = open(target, "a", encoding="utf-8")  # noqa: SIM115
            self.own_file = True
        else:
            self._stream = target
            self.own_file = False

    @property
    def file(self) -> IO[str]:
        """The stream written to."""
        return self._stream if self._stream is not None else sys.stdout

    def _clear_progress(self) -> None:
        if not self.own_file:
            from common import progress

            progress.get_progress().clear()

    def writekvs(self, kvs: dict[str, Any]) -> None:
        rows = []
        for key, val in sorted(kvs.items()):
            val = _to_builtin(val)
            sval = f"{val:<8.3g}" if isinstance(val, float) else str(val)
            rows.append((_truncate(key), _truncate(sval)))
        if not rows:
            return
        kw = max(len(k) for k, _ in rows)
        vw = max(len(v) for _, v in rows)
        dashes = "-" * (kw + vw + 7)
        lines = [dashes] + [f"| {k:<{kw}} | {v:<{vw}} |" for k, v in rows] + [dashes]
        self._clear_progress()
        self.file.write("\n".join(lines) + "\n")
        self.file.flush()

    def writeseq(self, seq: tuple[str, ...]) -> None:
        self._clear_progress()
        self.file.write(" ".join(str(s) for s in seq) + "\n")
        self.file.flush()

    def close(self) -> None:
        if self.own_file:
            self.file.close()


def _truncate(s: str, width: int = 40) -> str:
    return s[: width - 3] + "..." if len(s) > width else s


class FileOutputFormat(OutputFormat):
    """An output writing to one text file (UTF-8) that it opens, and closes on ``close``."""

    def __init__(self, path: str, mode: str, newline: str | None = None) -> None:
        self.path = path
        self.file = open(path, mode, encoding="utf-8", newline=newline)  # noqa: SIM115

    def close(self) -> None:
        self.file.close()


class JSONOutputFormat(FileOutputFormat):
    """progress.json: one JSON object per dump, one per line."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "a")

    def writekvs(self, kvs: dict[str, Any]) -> None:
        self.file.write(json.dumps({k: _to_builtin(v) for k, v in kvs.items()}) + "\n")
        self.file.flush()


class CSVOutputFormat(FileOutputFormat):
    """progress.csv with a header; a new key rewrites the file with a wider header."""

    def __init__(self, path: str) -> None:
        self.keys: list[str] = []
        super().__init__(path, "w+", newline="")

    def writekvs(self, kvs: dict[str, Any]) -> None:
        new_keys = [k for k in kvs if k not in self.keys]
        if new_keys:
            self.keys.extend(sorted(new_keys))
            self.file.seek(0)
            old_rows = list(csv.reader(self.file))[1:]
            self.file.seek(0)
            self.file.truncate()
            writer = csv.writer(self.file)
            writer.writerow(self.keys)
            for row in old_rows:
                writer.writerow(row + [""] * (len(self.keys) - len(row)))
        csv.writer(self.file).writerow(
            ["" if kvs.get(k) is None else _to_builtin(kvs[k]) for k in self.keys]
        )
        self.file.flush()


class TensorBoardOutputFormat(OutputFormat):
    """Scalars to TensorBoard event files (imports TensorFlow lazily)."""

    def __init__(self, folder: str) -> None:
        import tensorflow as tf  # heavy; only when this format is chosen

        self.tf = tf
        self.writer = tf.summary.create_file_writer(folder)
        self.step = 0

    def writekvs(self, kvs: dict[str, Any]) -> None:
        step = int(_to_builtin(kvs.get(TOTAL_TIMESTEPS, self.step)))
        with self.writer.as_default():
            for key, val in kvs.items():
                val = _to_builtin(val)
                if isinstance(val, (int, float)) and not isinstance(val, bool):
                    self.tf.summary.scalar(key, float(val), step=step)
        self.writer.flush()
        self.step += 1

    def close(self) -> None:
        self.writer.close()


def make_output_format(fmt: str, folder: str, suffix: str = "") -> OutputFormat:
    """Build one output by name (see ``KNOWN_FORMATS``)."""
    os.makedirs(folder, exist_ok=True)
    if fmt == "stdout":
        return HumanOutputFormat()
    if fmt == "log":
        return HumanOutputFormat(os.path.join(folder, f"log{suffix}.txt"))
    if fmt == "json":
        return JSONOutputFormat(os.path.join(folder, f"progress{suffix}.json"))
    if fmt == "csv":
        return CSVOutputFormat(os.path.join(folder, f"progress{suffix}.csv"))
    if fmt == "tensorboard":
        return TensorBoardOutputFormat(os.path.join(folder, f"tb{suffix}"))
    raise ValueError(f"unknown log format {fmt!r}; known: {', '.join(KNOWN_FORMATS)}")


class Logger:
    """Accumulates key/values between dumps and sends them to its outputs."""

    def __init__(self, folder: str | None, output_formats: list[OutputFormat], comm: Any = None) -> None:
        self.dir = folder
        self.output_formats = output_formats
        self.comm = comm
        self.level = INFO
        self.name2val: dict[str, Any] = {}
        self.name2cnt: dict[str, int] = defaultdict(int)

    def logkv(self, key: str, val: Any) -> None:
        self.name2val[key] = val

    def logkv_mean(self, key: str, val: float) -> None:
        old, cnt = self.name2val.get(key, 0.0), self.name2cnt[key]
        self.name2val[key] = old * cnt / (cnt + 1) + val / (cnt + 1)
        self.name2cnt[key] = cnt + 1

    def dumpkvs(self) -> dict[str, Any]:
        """Write the current values to every output, clear them and return them."""
        if self.comm is not None and self.comm.Get_size() > 1:
            means = mpi_util.weighted_mean(
                {k: (v, self.name2cnt.get(k, 1)) for k, v in self.name2val.items() if _is_number(v)}
            )
            if self.comm.Get_rank() == 0:
                self.name2val.update(means)
        out = dict(self.name2val)
        from common import progress

        progress.get_progress().update_from_kvs(out)
        for fmt in self.output_formats:
            fmt.writekvs(out)
        self.name2val.clear()
        self.name2cnt.clear()
        return out

    def log(self, *args: Any, level: int = INFO) -> None:
        if self.level <= level:
            for fmt in self.output_formats:
                fmt.writeseq(tuple(str(a) for a in args))

    def close(self) -> None:
        for fmt in self.output_formats:
            fmt.close()


def _is_number(v: Any) -> bool:
    v = _to_builtin(v)
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def default_log_dir() -> str:
    """A fresh folder name under the system temp dir: ``runner-YYYY-MM-DD-HH-MM-SS-ffffff``."""
    stamp = datetime.datetime.now().strftime("runner-%Y-%m-%d-%H-%M-%S-%f")
    return os.path.join(tempfile.gettempdir(), stamp)


_current: Logger | None = None


def configure(
    dir: str | None = None,
    format_strs: list[str] | tuple[str, ...] | None = None,
    comm: Any = None,
    all_ranks: bool = False,
) -> Logger:
    """Make a new current logger writing into ``dir`` (default: $RUNNER_LOGDIR or a temp folder).

    Args:
        format_strs: output names; default $RUNNER_LOG_FORMAT (comma separated) or stdout,log,csv.
        comm: an MPI communicator for averaging ``logkv_mean`` values over ranks.
        all_ranks: let ranks other than 0 write too (files get a ``-rankNNN`` suffix).
    """
    global _current
    folder = dir or os.environ.get("RUNNER_LOGDIR") or default_log_dir()
    folder = os.path.abspath(os.path.expanduser(folder))
    if format_strs is None:
        env_fmt = os.environ.get("RUNNER_LOG_FORMAT")
        format_strs = env_fmt.split(",") if env_fmt else list(DEFAULT_FORMATS)
    unknown = [f for f in format_strs if f not in KNOWN_FORMATS]
    if unknown:
        raise ValueError(f"unknown log format {unknown[0]!r}; known: {', '.join(KNOWN_FORMATS)}")
    rank = mpi_util.rank()  # imports mpi4py only under mpiexec
    suffix = ""
    if rank > 0:
        if not all_ranks:
            format_strs = []
        suffix = f"-rank{rank:03d}"
    os.makedirs(folder, exist_ok=True)
    outputs = [make_output_format(f, folder, suffix) for f in dict.fromkeys(format_strs)]
    if _current is not None and _current is not _default_logger:
        _current.close()
    _current = Logger(folder, outputs, comm)
    if outputs:
        _current.log(f"Logging to {folder}")
    return _current


_default_logger = Logger(None, [HumanOutputFormat()])


def get_current() -> Logger:
    """The current logger (a stdout-only one until ``configure`` is called)."""
    return _current if _current is not None else _default_logger


def reset() -> None:
    """Close the current logger and go back to the stdout-only default."""
    global _current
    if _current is not None and _current is not _default_logger:
        _current.close()
    _current = None


@contextlib.contextmanager
def scoped_configure(
    dir: str | None = None,
    format_strs: list[str] | tuple[str, ...] | None = None,
    comm: Any = None,
) -> Iterator[Logger]:
    """Use a fresh logger inside a ``with`` block, then restore the previous one."""
    global _current
    prev = _current
    _current = None  # so configure() does not close the previous logger
    try:
        yield configure(dir, format_strs, comm)
    finally:
        if _current is not None:
            _current.close()
        _current = prev


def logkv(key: str, val: Any) -> None:
    """Log a value for this iteration (the last call per key wins)."""
    get_current().logkv(key, val)


def logkv_mean(key: str, val: float) -> None:
    """Log a value to be averaged over the calls of this iteration."""
    get_current().logkv_mean(key, val)


def logkvs(d: dict[str, Any]) -> None:
    """Log several values at once."""
    for k, v in d.items():
        logkv(k, v)


def dumpkvs() -> dict[str, Any]:
    """Write this iteration's values and clear them; returns them."""
    return get_current().dumpkvs()


def getkvs() -> dict[str, Any]:
    """This iteration's values so far."""
    return get_current().name2val


def log(*args: Any, level: int = INFO) -> None:
    """Write a line of text to the human-readable outputs."""
    get_current().log(*args, level=level)


def debug(*args: Any) -> None:
    log(*args, level=DEBUG)


def info(*args: Any) -> None:
    log(*args, level=INFO)


def warn(*args: Any) -> None:
    log(*args, level=WARN)


def error(*args: Any) -> None:
    log(*args, level=ERROR)


def set_level(level: int) -> None:
    """Lowest level that ``log`` writes."""
    get_current().level = level


def get_dir() -> str | None:
    """The current log folder, or None when ``configure`` has not been called."""
    return get_current().dir


record_tabular = logkv
dump_tabular = dumpkvs

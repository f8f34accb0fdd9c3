"""The outputs of the logger ("format strings"): ``stdout`` (a table), ``log`` (log.txt), ``csv``
(progress.csv), ``json`` (progress.json, one object per line) and ``tensorboard`` (event files; imports
TensorFlow only when chosen)."""

from __future__ import annotations

import contextlib
import csv
import errno
import json
import os
import sys
import time
from typing import IO, Any

from common.errors import ConfigError
from common.logs.log_keys import TOTAL_TIMESTEPS
from common.process.std_streams import silence_stdout, tell

KNOWN_FORMATS = ("stdout", "log", "csv", "json", "tensorboard")
TABLE_INTERVAL_S = 10.0  # stdout that is not a terminal: at most one table per this many seconds, plus the last


def to_builtin(value: Any) -> Any:
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

    def flush(self) -> None:
        """Write what the output held back (the last table of a rate-limited stdout)."""

    def where(self) -> str:
        """Where the output writes, for messages."""
        return type(self).__name__


def drop_failed_output(fmt: OutputFormat, error: OSError) -> None:
    """After ``fmt`` failed with ``error``: say so in one line on stderr, close it quietly and, when it was
    stdout, send the rest of stdout to /dev/null (so nothing fails again when Python flushes it at exit)."""
    if fmt.where() == "stdout":
        silence_stdout()
    with contextlib.suppress(OSError, ValueError):
        fmt.close()
    tell(f"run: logging to {fmt.where()} failed ({error.strerror or error}); training goes on without it")


class HumanOutputFormat(OutputFormat):
    """A two-column table per dump, and plain lines for ``log()``; to a stream or a file. On ``sys.stdout``
    when it is not a terminal (a file, a pipe, a job's log) at most one table per ``TABLE_INTERVAL_S``: the
    latest one held back is written by ``flush`` (the files keep every row)."""

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
        self._held: str | None = None  # the newest table not written yet
        self._last_table: float | None = None  # time.monotonic() of the last table written

    @property
    def file(self) -> IO[str]:
        """The stream written to."""
        stream = self._stream if self._stream is not None else sys.stdout
        if stream is None:  # Python's sys.stdout when the process started with stdout closed
            raise OSError(errno.EBADF, "stdout is closed")
        return stream

    def where(self) -> str:
        if self._stream is None:
            return "stdout"
        return getattr(self._stream, "name", "a stream")

    def _clear_progress(self) -> None:
        if not self.own_file:
            from common.logs import progress

            progress.get_progress().clear()

    def writekvs(self, kvs: dict[str, Any]) -> None:
        rows = []
        for key, val in sorted(kvs.items()):
            val = to_builtin(val)
            sval = f"{val:<8.3g}" if isinstance(val, float) else str(val)
            rows.append((_truncate(key), _truncate(sval)))
        if not rows:
            return
        kw = max(len(k) for k, _ in rows)
        vw = max(len(v) for _, v in rows)
        dashes = "-" * (kw + vw + 7)
        table = "\n".join([dashes] + [f"| {k:<{kw}} | {v:<{vw}} |" for k, v in rows] + [dashes]) + "\n"
        now = time.monotonic()
        if self._rate_limited() and self._last_table is not None and now - self._last_table < TABLE_INTERVAL_S:
            self._held = table
            return
        self._write_table(table, now)

    def flush(self) -> None:
        if self._held is not None:
            self._write_table(self._held, time.monotonic())

    def _write_table(self, table: str, now: float) -> None:
        self._held, self._last_table = None, now
        self._clear_progress()
        self.file.write(table)
        self.file.flush()

    def _rate_limited(self) -> bool:
        """Whether tables are rate-limited: written to ``sys.stdout`` that is not a terminal."""
        if self._stream is not None:
            return False
        try:
            return not self.file.isatty()
        except ValueError:  # a closed stream: the write says so
            return False

    def writeseq(self, seq: tuple[str, ...]) -> None:
        self._clear_progress()
        self.file.write(" ".join(str(s) for s in seq) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.flush()
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

    def where(self) -> str:
        return self.path


class JSONOutputFormat(FileOutputFormat):
    """progress.json: one JSON object per dump, one per line."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "a")

    def writekvs(self, kvs: dict[str, Any]) -> None:
        self.file.write(json.dumps({k: to_builtin(v) for k, v in kvs.items()}) + "\n")
        self.file.flush()


class CSVOutputFormat(FileOutputFormat):
    """progress.csv with a header; a new key rewrites the file with a wider header. ``append``: continue
    the file's rows and header (a resumed run)."""

    def __init__(self, path: str, append: bool = False) -> None:
        self.keys: list[str] = []
        if append and os.path.isfile(path):
            super().__init__(path, "r+", newline="")
            self.keys = next(csv.reader(self.file), [])
            self.file.seek(0, os.SEEK_END)
        else:
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
            ["" if kvs.get(k) is None else to_builtin(kvs[k]) for k in self.keys]
        )
        self.file.flush()


class TensorBoardOutputFormat(OutputFormat):
    """Scalars to TensorBoard event files (imports TensorFlow lazily)."""

    def __init__(self, folder: str) -> None:
        try:
            import tensorboard  # noqa: F401  (tf.summary writes nothing without it)
        except ImportError:
            raise ConfigError("--log_format tensorboard needs the tensorboard package: pip install tensorboard") from None
        import tensorflow as tf  # heavy; only when this format is chosen

        self.tf = tf
        self.writer = tf.summary.create_file_writer(folder)
        self.folder = folder
        self.step = 0

    def writekvs(self, kvs: dict[str, Any]) -> None:
        step = int(to_builtin(kvs.get(TOTAL_TIMESTEPS, self.step)))
        with self.writer.as_default():
            for key, val in kvs.items():
                val = to_builtin(val)
                if isinstance(val, (int, float)) and not isinstance(val, bool):
                    self.tf.summary.scalar(key, float(val), step=step)
        self.writer.flush()
        self.step += 1

    def close(self) -> None:
        self.writer.close()

    def where(self) -> str:
        return self.folder


def make_output_format(fmt: str, folder: str, suffix: str = "", append: bool = False) -> OutputFormat:
    """Build one output by name (see ``KNOWN_FORMATS``); ``append``: continue progress.csv (the other
    files are appended to anyway)."""
    os.makedirs(folder, exist_ok=True)
    if fmt == "stdout":
        return HumanOutputFormat()
    if fmt == "log":
        return HumanOutputFormat(os.path.join(folder, f"log{suffix}.txt"))
    if fmt == "json":
        return JSONOutputFormat(os.path.join(folder, f"progress{suffix}.json"))
    if fmt == "csv":
        return CSVOutputFormat(os.path.join(folder, f"progress{suffix}.csv"), append)
    if fmt == "tensorboard":
        return TensorBoardOutputFormat(os.path.join(folder, f"tb{suffix}"))
    raise ValueError(f"unknown log format {fmt!r}; known: {', '.join(KNOWN_FORMATS)}")

"""Key/value and text logging in the style of OpenAI baselines.

Module API: ``configure``, ``logkv``, ``logkv_mean``, ``dumpkvs``, ``log``, ``info/warn/error``,
``get_dir``, ``get_current``, ``scoped_configure``. The outputs ("format strings" such as ``stdout``,
``csv``, ``tensorboard``) are in ``common.logs.log_formats``. Under MPI only rank 0 writes unless
``all_ranks=True``; values logged with ``logkv_mean`` are averaged over ranks at dump time.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from common.env_vars import LOG_FORMAT, LOGDIR, env_text
from common.logs.log_formats import (
    KNOWN_FORMATS,
    HumanOutputFormat,
    OutputFormat,
    drop_failed_output,
    make_output_format,
    to_builtin,
)
from common.mpi import mpi_util

DEBUG, INFO, WARN, ERROR, DISABLED = 10, 20, 30, 40, 50
DEFAULT_FORMATS = ("stdout", "log", "csv")


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
        from common.logs import progress

        progress.get_progress().update_from_kvs(out)
        self._to_outputs(lambda fmt: fmt.writekvs(out))
        self.name2val.clear()
        self.name2cnt.clear()
        return out

    def log(self, *args: Any, level: int = INFO) -> None:
        if self.level <= level:
            text = tuple(str(a) for a in args)
            self._to_outputs(lambda fmt: fmt.writeseq(text))

    def flush(self) -> None:
        """Write what the outputs held back (stdout's last table when it is rate-limited)."""
        self._to_outputs(lambda fmt: fmt.flush())

    def close(self) -> None:
        self._to_outputs(lambda fmt: fmt.close())

    def _to_outputs(self, write: Callable[[OutputFormat], None]) -> None:
        """``write`` to each output; an output that fails (a full disk, a closed pipe) is dropped with one
        line on stderr, and the run goes on with the others."""
        for fmt in list(self.output_formats):
            try:
                write(fmt)
            except OSError as e:
                self.output_formats.remove(fmt)
                drop_failed_output(fmt, e)


def _is_number(v: Any) -> bool:
    v = to_builtin(v)
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
    append: bool = False,
) -> Logger:
    """Make a new current logger writing into ``dir`` (default: $RUNNER_LOGDIR or a temp folder).

    Args:
        format_strs: output names; default $RUNNER_LOG_FORMAT (comma separated) or stdout,log,csv.
        comm: an MPI communicator for averaging ``logkv_mean`` values over ranks.
        all_ranks: let ranks other than 0 write too (files get a ``-rankNNN`` suffix).
        append: continue the folder's progress.csv (a resumed run) instead of starting it anew.
    """
    global _current
    folder = dir or env_text(LOGDIR) or default_log_dir()
    folder = os.path.abspath(os.path.expanduser(folder))
    if format_strs is None:
        env_fmt = env_text(LOG_FORMAT)
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
    outputs = [make_output_format(f, folder, suffix, append) for f in dict.fromkeys(format_strs)]
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


def flush() -> None:
    """Write what the outputs held back: the end of a training shows its last table."""
    get_current().flush()


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

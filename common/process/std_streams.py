"""The process's standard streams when they are closed or their reader went away (``>&-``, ``| head``)."""

from __future__ import annotations

import os
import sys

STREAMS = ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w"))


def open_closed_streams() -> None:
    """Give each standard stream the process started without (its file descriptor closed) /dev/null, so
    that no file opened later takes descriptor 1 or 2 and receives what is printed."""
    for fd, name, mode in STREAMS:
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, encoding="utf-8", closefd=False))  # noqa: SIM115


def silence_stdout() -> None:
    """Send the rest of stdout to /dev/null after writing to it failed (its reader left): what is still
    buffered or printed later goes nowhere instead of failing again, also when Python flushes at exit."""
    stream = sys.stdout
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError, AttributeError):  # a replaced stdout (pytest, a notebook)
        fd = -1
    if fd == 1:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    else:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process


def tell(line: str) -> None:
    """One line on stderr about something that failed while the run goes on; never fails itself (stderr
    may be closed or full too)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass


def write_failed(what: str, error: OSError, consequence: str = "training goes on") -> None:
    """``tell`` that ``what`` could not be written: 'run: <what> not written (<reason>); <consequence>'."""
    tell(f"run: {what} not written ({error.strerror or error}); {consequence}")

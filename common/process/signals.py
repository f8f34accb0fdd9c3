"""SIGTERM and SIGHUP (schedulers, ``timeout``, closed terminals) handled like Ctrl-C; after the first of
these signals (Ctrl-C included) the next ones are ignored, so that the save the first one started ends
(under ``mpiexec`` a rank can get Ctrl-C twice: from the terminal and from the launcher).

Python runs signal handlers in the main thread only, so a thread that waits on something the signal
should end (an MPI collective called from a TensorFlow op, say) asks ``arrived()`` instead: the block
also makes the interpreter write each signal's number to a pipe, which that function reads."""
from __future__ import annotations

import _thread
import contextlib
import os
import signal
from collections.abc import Iterator

HANDLED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM, SIGHUP or SIGINT."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _Handed:
    """An error another thread handed to the main thread (``raise_in_main``), raised by the next handler call."""

    error: BaseException | None = None


def _raise_terminated(signum: int, _frame: object) -> None:
    for sig in HANDLED:  # a second signal must not cut the save that the first one started
        signal.signal(sig, signal.SIG_IGN)
    error, _Handed.error = _Handed.error, None
    raise error if error is not None else Terminated(signum)


def raise_in_main(error: BaseException) -> None:
    """From another thread: make the main thread raise ``error`` once it runs Python code again.

    Inside ``termination_as_interrupt`` (the command line) the SIGINT handler raises it; elsewhere the main
    thread gets a plain KeyboardInterrupt. The first error handed over wins.
    """
    if _Handed.error is None:
        _Handed.error = error
    _thread.interrupt_main(signal.SIGINT)


class _Wakeup:
    """Read end of the pipe the interpreter writes signal numbers to, and the first handled one seen."""

    fd: int | None = None
    signum: int | None = None


def arrived() -> int | None:
    """The first of SIGTERM/SIGHUP/SIGINT received inside ``termination_as_interrupt``, or None.

    Safe from any thread (it reads the wake-up pipe without blocking); the answer stays once given.
    """
    while _Wakeup.signum is None and _Wakeup.fd is not None:
        try:
            data = os.read(_Wakeup.fd, 64)
        except (BlockingIOError, OSError):
            break
        if not data:
            break
        _Wakeup.signum = next((sig for sig in data if sig in HANDLED), None)
    return _Wakeup.signum


@contextlib.contextmanager
def termination_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM, SIGHUP and SIGINT raise ``Terminated`` (a KeyboardInterrupt), once."""
    previous = {sig: signal.signal(sig, _raise_terminated) for sig in HANDLED}
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    _Wakeup.fd, _Wakeup.signum = read_fd, None
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_fd)
        _Wakeup.fd = None
        os.close(read_fd)
        os.close(write_fd)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_status(interrupt: KeyboardInterrupt) -> int:
    """The shell's status for an interrupted run: 128 + the signal number (130 for Ctrl-C)."""
    return 128 + getattr(interrupt, "signum", signal.SIGINT)


def describe(interrupt: KeyboardInterrupt) -> str:
    """'interrupted' for Ctrl-C, 'terminated (SIGTERM)' for a signal."""
    if isinstance(interrupt, Terminated) and interrupt.signum != signal.SIGINT:
        return f"terminated ({interrupt})"
    return "interrupted"

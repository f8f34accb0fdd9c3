"""SIGTERM and SIGHUP (schedulers, ``timeout``, closed terminals) handled like Ctrl-C; after the first of
these signals (Ctrl-C included) the next ones are ignored, so that the save the first one started ends
(under ``mpiexec`` a rank can get Ctrl-C twice: from the terminal and from the launcher)."""
from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

HANDLED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM, SIGHUP or SIGINT."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, _frame: object) -> None:
    for sig in HANDLED:  # a second signal must not cut the save that the first one started
        signal.signal(sig, signal.SIG_IGN)
    raise Terminated(signum)


@contextlib.contextmanager
def termination_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM, SIGHUP and SIGINT raise ``Terminated`` (a KeyboardInterrupt), once."""
    previous = {sig: signal.signal(sig, _raise_terminated) for sig in HANDLED}
    try:
        yield
    finally:
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

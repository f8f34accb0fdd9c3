"""An interrupt held until a training reaches a step where its state is whole: while held, the first SIGINT,
SIGTERM or SIGHUP is noted instead of handled; the training writes its training-state checkpoint at its
next step boundary and then hands the signal to the handler that was in place (which raises, as it would
have). A second signal, or ``HOLD_S`` seconds without reaching a boundary, hands it over at once."""
from __future__ import annotations

import _thread
import signal
import threading
from types import FrameType

from common.process.signals import HANDLED
from common.process.std_streams import tell

HOLD_S = 20.0  # the longest a held signal waits for the training's next step boundary


class InterruptHold:
    """Holds the first of SIGINT/SIGTERM/SIGHUP between ``start`` and ``release`` (main thread only)."""

    def __init__(self) -> None:
        self.previous: dict[int, signal.Handlers | object] = {}
        self.held: int | None = None  # the signal number held, None while none came
        self._timer: threading.Timer | None = None

    def start(self) -> bool:
        """Hold the signals whose handler is Python code (Ctrl-C's KeyboardInterrupt, the command line's
        ``termination_as_interrupt``); False when none is held (not the main thread, no such handler)."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for sig in HANDLED:
            handler = signal.getsignal(sig)
            if callable(handler):
                self.previous[sig] = handler
                signal.signal(sig, self._hold)
        return bool(self.previous)

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        if self.held is not None:  # the second signal: leave now
            self.release()
            return
        self.held = signum
        self._timer = threading.Timer(HOLD_S, _thread.interrupt_main, (signum,))
        self._timer.daemon = True
        self._timer.start()
        what = "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
        tell(f"run: {what}: finishing this step to write a training-state checkpoint (signal again to stop now)")

    def release(self, hand_over: bool = True) -> None:
        """Put the previous handlers back; with ``hand_over``, a held signal goes to its handler now (which
        raises KeyboardInterrupt or ``signals.Terminated``)."""
        if self._timer is not None:
            self._timer.cancel()
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        held, self.held, previous, self.previous = self.held, None, self.previous, {}
        if hand_over and held is not None and callable(handler := previous.get(held)):
            handler(held, None)

"""A small terminal progress bar for training runs, and the hook algorithms use to feed it.

run.py makes a ``ProgressBar`` and activates it with ``set_progress``; an algorithm calls
``get_progress().update(timesteps_done, mean_return)`` (a no-op object when no bar is active); the mean
return may be a function, called only when the bar redraws.
Values dumped through ``common.logs.logger`` also feed it (the keys of ``common.logs.log_keys``), so an algorithm
that only logs still moves the bar.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from common.logs.log_keys import EP_RETURN_MEAN, TOTAL_TIMESTEPS


def _format_duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"


class NullProgress:
    """Does nothing; what ``get_progress()`` returns when no bar is active."""

    enabled = False

    def update(self, timesteps_done: int, mean_return: float | Callable[[], float] | None = None) -> None:
        """Ignore."""

    def update_from_kvs(self, kvs: dict[str, Any]) -> None:
        """Ignore."""

    def clear(self) -> None:
        """Ignore."""

    def close(self) -> None:
        """Ignore."""


class ProgressBar(NullProgress):
    """One line on stderr: bar, timesteps, fps, recent mean return, ETA; redrawn at most 4 times a second.

    Args:
        total_timesteps: the run's length; the bar is full at this many timesteps.
        enabled: draw at all; None means "when the stream is a terminal".
        stream: where to draw (default sys.stderr).
        min_interval: seconds between redraws.
    """

    def __init__(self, total_timesteps: int, enabled: bool | None = None, stream: IO[str] | None = None,
                 min_interval: float = 0.25) -> None:
        self.total = max(int(total_timesteps), 0)
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled and self.total > 0
        self.min_interval = min_interval
        self.start = time.perf_counter()
        self.last_draw = -float("inf")
        self.done = 0
        self.mean_return: float | None = None
        self._pending_return: Callable[[], float] | None = None  # asked for at the next redraw
        self.width = 0

    def update(self, timesteps_done: int, mean_return: float | Callable[[], float] | None = None) -> None:
        """Record progress; redraws when the last redraw is older than ``min_interval``. ``mean_return`` may
        be a function: it is called only when the bar draws (most updates draw nothing)."""
        self.done = int(timesteps_done)
        if callable(mean_return):
            self._pending_return = mean_return
        elif mean_return is not None:
            self._pending_return = None
            self._set_return(mean_return)
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.last_draw >= self.min_interval or self.done >= self.total:
            self.last_draw = now
            self._draw(now)

    def update_from_kvs(self, kvs: dict[str, Any]) -> None:
        """Pick timesteps and mean return out of a logger dump, when present."""
        steps, ret = kvs.get(TOTAL_TIMESTEPS), kvs.get(EP_RETURN_MEAN)
        if steps is not None:
            self.update(int(steps), None if ret is None else float(ret))

    def _set_return(self, value: float) -> None:
        if not math.isnan(value):
            self.mean_return = float(value)

    def line(self, now: float | None = None) -> str:
        """The text of the bar for the current state."""
        if self._pending_return is not None:
            self._set_return(self._pending_return())
        now = time.perf_counter() if now is None else now
        elapsed = max(now - self.start, 1e-9)
        frac = min(self.done / self.total, 1.0) if self.total else 1.0
        filled = int(frac * 20)
        fps = self.done / elapsed
        eta = (self.total - self.done) / fps if fps > 0 else 0.0
        text = (f"[{'#' * filled}{'.' * (20 - filled)}] {self.done}/{self.total} {frac:4.0%} "
                f"{fps:,.0f} fps")
        if self.mean_return is not None:
            text += f" return {self.mean_return:.4g}"
        return text + f" elapsed {_format_duration(elapsed)} eta {_format_duration(eta)}"

    def _draw(self, now: float) -> None:
        text = self.line(now)
        pad = " " * max(self.width - len(text), 0)
        self.stream.write("\r" + text + pad)
        self.stream.flush()
        self.width = len(text)

    def clear(self) -> None:
        """Erase the bar so other output starts on a clean line (it reappears on the next update)."""
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
            self.last_draw = -float("inf")

    def close(self) -> None:
        """Draw the final state and end the line."""
        if self.enabled and self.done:
            self._draw(time.perf_counter())
            self.stream.write("\n")
            self.stream.flush()
        self.enabled = False


_NULL = NullProgress()
_active: NullProgress = _NULL


def set_progress(bar: NullProgress | None) -> None:
    """Make ``bar`` the one algorithms feed (None: none)."""
    global _active
    _active = bar if bar is not None else _NULL


def get_progress() -> NullProgress:
    """The active progress bar, or a no-op one."""
    return _active

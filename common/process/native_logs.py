"""TensorFlow's native start-up chatter: recognising its lines, and a block that drops them from stderr
unless the run is verbose (``--verbose`` or ``RUNNER_VERBOSE=1``)."""
from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Sequence

from common.env_vars import VERBOSE as VERBOSE_ENV
from common.env_vars import env_flag

VERBOSE_FLAG = "--verbose"

# absl's INFO and WARNING lines ("I0000 00:00:1795468213.207682    1514 port.cc:153] ...") and the two
# fixed texts TensorFlow prints around them at import.
_CHATTER = re.compile(
    r"^(?:[IW]\d{4} [\d:.]+\s+\d+ \S+:\d+\] "
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags"
    r"|INFO: Created TensorFlow Lite XNNPACK delegate for CPU\.)"
)


def verbose_requested(argv: Sequence[str] | None = None) -> bool:
    """``--verbose`` among the arguments (default: ``sys.argv``) or ``RUNNER_VERBOSE`` set to a true value."""
    args = sys.argv[1:] if argv is None else argv
    return VERBOSE_FLAG in args or env_flag(VERBOSE_ENV)


def is_chatter(line: str) -> bool:
    """Whether a stderr line is TensorFlow start-up chatter (absl INFO/WARNING lines and their notes)."""
    return bool(_CHATTER.match(line))


def quiet_native_logs() -> contextlib.AbstractContextManager:
    """A block whose native stderr chatter (e.g. the TFLite interpreter's XNNPACK line) is dropped, unless
    verbose; everything else it writes to stderr is kept."""
    return contextlib.nullcontext() if verbose_requested(()) else _stderr_without_chatter()


@contextlib.contextmanager
def _stderr_without_chatter() -> Iterator[None]:
    """Send file descriptor 2 to a temporary file, then write back what is not chatter."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no usable fd 2: nothing to filter
        yield
        return
    import tempfile  # here: importing it costs ~10 ms that --help and plain imports need not pay

    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", "replace")
            kept = "".join(line for line in text.splitlines(keepends=True) if not is_chatter(line))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()

"""A quiet, quick start for the command-line programs (``run``, ``tune``).

``quiet_tensorflow()`` is called by the entry module before anything imports TensorFlow. By default it
hides TensorFlow's start-up chatter: the C++/absl lines printed while ``import tensorflow`` runs (oneDNN,
"Could not find cuda drivers", "All log messages before absl::InitializeLog()") are dropped from what
that import writes to stderr, and ``TF_CPP_MIN_LOG_LEVEL=3`` silences the later ones (the
``E0000 ... failed call to cuInit`` line of a CPU machine, XLA's "Compiled cluster" notes). Anything else
written to stderr during the import is kept. ``--verbose`` on the command line or ``RUN_VERBOSE=1`` in
the environment shows all of it again; a ``TF_CPP_MIN_LOG_LEVEL`` the user set is left alone. The setting
travels to subprocesses (env workers, MPI ranks) through the environment.

Whatever the verbosity, the import skips TensorFlow's eager import of Keras (``keras.src.optimizers``,
which pulls in all of Keras and matplotlib.pyplot: about 1 s of a 3-4 s ``import tensorflow``). Nothing
here uses Keras; ``tf.keras`` still loads on first use. And TensorFlow's public namespaces load on first use
(``common/tf_namespaces.py``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any

VERBOSE_ENV = "RUN_VERBOSE"
VERBOSE_FLAG = "--verbose"
_LOG_LEVEL_ENV = "TF_CPP_MIN_LOG_LEVEL"
_OURS_ENV = "RUN_SET_TF_LOG_LEVEL"  # marks a TF_CPP_MIN_LOG_LEVEL set here (undone by show_tensorflow_logs)
_KERAS_PRELOAD = "keras.src.optimizers"  # what tensorflow/__init__.py imports eagerly, inside try/except

# absl's INFO and WARNING lines ("I0000 00:00:1795468213.207682    1514 port.cc:153] ...") and the two
# fixed texts TensorFlow prints around them at import.
_CHATTER = re.compile(
    r"^(?:[IW]\d{4} [\d:.]+\s+\d+ \S+:\d+\] "
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags"
    r"|INFO: Created TensorFlow Lite XNNPACK delegate for CPU\.)"
)


def verbose_requested(argv: Sequence[str] | None = None) -> bool:
    """``--verbose`` among the arguments (default: ``sys.argv``) or ``RUN_VERBOSE`` set to a true value."""
    args = sys.argv[1:] if argv is None else argv
    return VERBOSE_FLAG in args or env_flag(VERBOSE_ENV)


def env_flag(name: str) -> bool:
    """Whether the environment variable ``name`` is set to a true value (not empty, 0, false or no)."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def is_chatter(line: str) -> bool:
    """Whether a stderr line is TensorFlow start-up chatter (absl INFO/WARNING lines and their notes)."""
    return bool(_CHATTER.match(line))


def quiet_tensorflow(argv: Sequence[str] | None = None) -> bool:
    """Set up TensorFlow's import and logging for a command line ``argv`` (default: ``sys.argv``);
    call before TensorFlow is imported. Returns whether the run is verbose."""
    verbose = verbose_requested(argv)
    if verbose:
        show_tensorflow_logs()
    elif _LOG_LEVEL_ENV not in os.environ:
        os.environ[_LOG_LEVEL_ENV] = "3"
        os.environ[_OURS_ENV] = "1"
    if "tensorflow" not in sys.modules and not any(isinstance(f, _TensorFlowFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TensorFlowFinder())
    return verbose



def show_tensorflow_logs() -> None:
    """Let TensorFlow's logs through (``--verbose``): for this process when TensorFlow is not imported
    yet, and for its subprocesses."""
    os.environ[VERBOSE_ENV] = "1"
    if os.environ.pop(_OURS_ENV, None):
        os.environ.pop(_LOG_LEVEL_ENV, None)


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


class _QuietLoader:  # duck-typed (importlib.abc costs ~50 ms of imports)
    """Runs the real loader of ``tensorflow`` with its chatter filtered and without the Keras preload."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = module.__spec__.loader = self.loader  # the module sees its usual loader
        # imported here: `run --help` imports this module and never needs that one
        from common import tf_namespaces

        quiet = not verbose_requested(())

        skip_keras = _KERAS_PRELOAD not in sys.modules
        if skip_keras:
            sys.modules[_KERAS_PRELOAD] = None  # type: ignore[assignment]  # its import raises ImportError
        try:
            with (_stderr_without_chatter() if quiet else contextlib.nullcontext(),
                  tf_namespaces.deferred_while_importing(module)):
                self.loader.exec_module(module)
        finally:
            if skip_keras and sys.modules.get(_KERAS_PRELOAD, 0) is None:
                del sys.modules[_KERAS_PRELOAD]


class _TensorFlowFinder:
    """Finds ``tensorflow`` as usual (once) and hands its import to ``_QuietLoader``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "tensorflow":
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # the other finders, this one removed
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec

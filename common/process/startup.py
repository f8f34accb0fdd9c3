"""A quiet, quick start for the command-line programs (``run``, ``tune``).

``quiet_tensorflow()`` is called by the entry module before anything imports TensorFlow. By default it
hides TensorFlow's start-up chatter: the C++/absl lines printed while ``import tensorflow`` runs (oneDNN,
"Could not find cuda drivers", "All log messages before absl::InitializeLog()") are dropped from what
that import writes to stderr, and ``TF_CPP_MIN_LOG_LEVEL=3`` silences the later ones (the
``E0000 ... failed call to cuInit`` line of a CPU machine, XLA's "Compiled cluster" notes). Anything else
written to stderr during the import is kept. ``--verbose`` on the command line or ``RUNNER_VERBOSE=1`` in
the environment shows all of it again; a ``TF_CPP_MIN_LOG_LEVEL`` the user set is left alone. The setting
travels to subprocesses (env workers, MPI ranks) through the environment.

Whatever the verbosity, the import skips TensorFlow's eager import of Keras (``keras.src.optimizers``,
which pulls in all of Keras and matplotlib.pyplot: about 1 s of a 3-4 s ``import tensorflow``). Nothing
here uses Keras; ``tf.keras`` still loads on first use. And TensorFlow's public namespaces load on first use
(``common/process/tf_namespaces.py``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import Any

from common import env_vars
from common.process.native_logs import (  # noqa: F401  (their home before; callers use them from here)
    VERBOSE_ENV,
    VERBOSE_FLAG,
    _stderr_without_chatter,
    env_flag,
    is_chatter,
    quiet_native_logs,
    verbose_requested,
)

_LOG_LEVEL_ENV = "TF_CPP_MIN_LOG_LEVEL"
_OURS_ENV = env_vars.SET_TF_LOG_LEVEL  # marks a TF_CPP_MIN_LOG_LEVEL set here (undone by show_tensorflow_logs)
_KERAS_PRELOAD = "keras.src.optimizers"  # what tensorflow/__init__.py imports eagerly, inside try/except

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


class _QuietLoader:  # duck-typed (importlib.abc costs ~50 ms of imports)
    """Runs the real loader of ``tensorflow`` with its chatter filtered and without the Keras preload."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = module.__spec__.loader = self.loader  # the module sees its usual loader
        # imported here: `run --help` imports this module and never needs that one
        from common.process import tf_namespaces

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

"""The environment variables the runner reads, all named ``RUNNER_*`` (docs/environment-variables.md).

Earlier names (``RUN_VERBOSE``, ``RUN_TF_EAGER_NAMESPACES``) are still read when the new one is not set.
"""
from __future__ import annotations

import os

VERBOSE = "RUNNER_VERBOSE"
TF_EAGER_NAMESPACES = "RUNNER_TF_EAGER_NAMESPACES"
TF_THREADS = "RUNNER_TF_THREADS"
MAX_WORKERS = "RUNNER_MAX_WORKERS"
LOGDIR = "RUNNER_LOGDIR"
LOG_FORMAT = "RUNNER_LOG_FORMAT"
MPI_TIMEOUT = "RUNNER_MPI_TIMEOUT"
SET_TF_LOG_LEVEL = "RUNNER_SET_TF_LOG_LEVEL"  # internal: marks a TF_CPP_MIN_LOG_LEVEL the runner set

FORMER_NAMES = {VERBOSE: "RUN_VERBOSE", TF_EAGER_NAMESPACES: "RUN_TF_EAGER_NAMESPACES"}


def env_text(name: str) -> str:
    """The value of ``name`` (else of its former name), stripped; '' when neither is set."""
    value = os.environ.get(name)
    if value is None and name in FORMER_NAMES:
        value = os.environ.get(FORMER_NAMES[name])
    return (value or "").strip()


def env_flag(name: str) -> bool:
    """Whether the environment variable ``name`` is set to a true value (not empty, 0, false or no)."""
    return env_text(name).lower() not in ("", "0", "false", "no")

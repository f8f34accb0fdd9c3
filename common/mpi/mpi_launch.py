"""Was this process started by an MPI launcher? Read from the variables process managers set (no mpi4py).

``common.mpi.mpi_util`` decides from them whether to import mpi4py; ``common.vec_env`` removes them from the
environment of its worker processes (``MPI_ENV_PREFIXES``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Variables set by process managers for the processes they start: MPICH/Intel MPI/MS-MPI hydra (PMI_*),
# Open MPI (OMPI_COMM_WORLD_*), PMIx launchers (Open MPI 5, srun --mpi=pmix), MVAPICH (MV2_*).
# SubprocVecEnv workers must start with all of them removed (common.vec_env.clear_mpi_env_vars).
MPI_ENV_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "MV2_", "HYDRA_", "MPIR_", "MPI_")
_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK")
_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
_LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE")
_MARKER_VARS = _RANK_VARS + _SIZE_VARS + ("PMI_FD", "PMI_PORT", "PMIX_NAMESPACE", "MPI_LOCALNRANKS")


def launched_by_mpi(environ: Mapping[str, str] | None = None) -> bool:
    """Return True when the environment shows the process was started by an MPI process manager."""
    env = os.environ if environ is None else environ
    return any(name in env for name in _MARKER_VARS)


def launcher_size(environ: Mapping[str, str]) -> int | None:
    """The number of processes the launcher announced in ``environ`` (None when it announced none)."""
    return _first_count(environ, _SIZE_VARS)


def launcher_local_size(environ: Mapping[str, str] | None = None) -> int | None:
    """The number of processes the launcher started on this host (None when it announced none)."""
    return _first_count(os.environ if environ is None else environ, _LOCAL_SIZE_VARS)


def _first_count(environ: Mapping[str, str], names: tuple[str, ...]) -> int | None:
    """The first of ``names`` in ``environ`` that holds a whole number, as an int."""
    for name in names:
        value = environ.get(name, "")
        if value.strip().isdigit():
            return int(value)
    return None

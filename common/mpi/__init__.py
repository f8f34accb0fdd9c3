"""MPI: the one place that imports mpi4py, cross-rank statistics and launch detection."""

"""Ending a finished run's process without the interpreter's final teardown.

After ``python -m run`` has done its work, CPython's shutdown frees every module and object one by one, and
TensorFlow's native libraries tear down after it: 0.4-0.7 s of a 256-step CartPole run on a quiet 2-core machine
(``bench/startup.py``), spent after the last line is printed. ``exit_skipping_teardown`` does what the shutdown
does that anyone could observe (wait for non-daemon threads, run the ``atexit`` handlers: multiprocessing's
children, temporary folders; close the log files; flush stdout and stderr) and then ends the process at once.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn


def exit_skipping_teardown(status: int = 0) -> NoReturn:
    """Exit with ``status`` after the observable parts of interpreter shutdown, skipping the rest. Exits the
    usual way in a process that imported mpi4py (MPI's finalisation runs at the very end of the interpreter's
    shutdown, outside ``atexit``, and mpiexec reports a rank that skips it as failed) and under a trace or
    profile hook (``python -m cProfile``, coverage: they report after the program returns)."""
    if "mpi4py.MPI" in sys.modules or sys.gettrace() is not None or sys.getprofile() is not None:
        sys.exit(status)  # MPI, or a profiler / coverage tool that reports after the program returns
    from common.logs import logger

    logger.reset()  # closes progress.csv, log.txt, TensorBoard's writer
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # what Py_Finalize would run next (CPython's own entry point for it)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)

"""A script that starts a run without ``if __name__ == "__main__":``, caught in its worker processes.

The "spawn" and "forkserver" start methods re-run the main script in each new process before the process's
own code starts, so a script that starts a run at its top level starts it again in every env worker.
``leave_if_reimporting_main`` is called where a run or a SubprocVecEnv starts: in an env worker that is
re-running the main script it ends the worker at once with ``REIMPORTED_MAIN_EXIT`` (SubprocVecEnv then
reports ``reimport_message`` in the parent, one line); in any other process started by multiprocessing it
raises ``MainReimportError``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys

from common.errors import UserError

WORKER_NAME_PREFIX = "vec_env_worker_"  # the names of SubprocVecEnv's worker processes
REIMPORTED_MAIN_EXIT = 86  # a worker's exit code: it left while re-running the main script


class MainReimportError(UserError):
    """A run was started while a process of multiprocessing re-ran the main script."""


def reimporting_main() -> bool:
    """Whether this process is a multiprocessing child still re-running the main script (the flag
    multiprocessing itself reads to refuse starting processes at that point)."""
    return bool(getattr(mp.current_process(), "_inheriting", False))


def reimport_message(what: str) -> str:
    """One line: ``what`` (e.g. "the worker process of env 0") re-ran the main script, and the fix."""
    script = getattr(sys.modules.get("__main__"), "__file__", None) or "the main script"
    return (f"{what} re-ran {script}, which starts a run outside `if __name__ == \"__main__\":` (new processes "
            "import the main script); put the code that starts the run under `if __name__ == \"__main__\":`")


def leave_if_reimporting_main() -> None:
    """End an env worker that is re-running the main script (its parent reports it); raise
    ``MainReimportError`` in another process of multiprocessing doing so; else do nothing."""
    if not reimporting_main():
        return
    process = mp.current_process()
    if process.name.startswith(WORKER_NAME_PREFIX):
        os._exit(REIMPORTED_MAIN_EXIT)  # at once (what the script printed here and not yet flushed is dropped)
    raise MainReimportError(reimport_message(f"the process {process.name!r}"))

"""The ``runner`` console command of an installed project: ``python -m run`` from any folder.

It runs ``run.py`` as ``__main__`` (the same fast ``--help``, quiet start and exit as ``python -m run``) with
the current folder first on the import path, as ``python -m`` puts it there, so ``--env=mymodule:MyEnv-v0``
imports the user's own module.
"""
from __future__ import annotations

import os
import runpy
import sys


def main() -> None:
    """Run the command line as ``python -m run`` would."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    runpy.run_module("run", run_name="__main__", alter_sys=True)

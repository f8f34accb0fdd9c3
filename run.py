"""The training runner: ``python -m run --alg=ppo2 --env=CartPole-v1 [--hyperparameter=value ...]``.

From Python: ``import run; model = run.main(["--alg=ppo2", "--env=CartPole-v1"])``. Called with an
argument list, ``main`` raises the error (``run_util.UsageError``, ``common.files.model_file.ModelFileError``,
...) so an IDE shows it; called with no list (the command line) it prints one line ``run: error: ...``
and exits with status 2 (130 after Ctrl-C). TensorFlow is only imported by the algorithm.
"""

from __future__ import annotations

import os

# numpy's BLAS threads only hurt here: the numpy matrix products are the small forward passes used for
# acting, and a threaded OpenBLAS spinning against the learner on a busy 2-core machine took 7.9 ms for an
# 8x256 @ 256x256 product that takes 21-83 us on one thread. Set before numpy loads; users may override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys

from common.process import startup

if __name__ == "__main__" and {"-h", "--help"} & set(sys.argv[1:]):  # help without importing numpy & co
    from runner.cli import print_help

    print_help(sys.argv[1:])
    sys.exit(0)
startup.quiet_tensorflow()  # before anything imports TensorFlow: no start-up chatter unless --verbose

from runner.app import complete_args, main, parse_args, play_model, train
from runner.cli import common_arg_parser, parse_cmdline_kwargs
from runner.play import play
from runner.process_exit import exit_skipping_teardown

__all__ = ["common_arg_parser", "complete_args", "main", "parse_args", "parse_cmdline_kwargs", "play", "play_model",
           "train"]

if __name__ == "__main__":
    main()
    exit_skipping_teardown(0)  # the run is done: skip the interpreter's and TensorFlow's teardown (~0.5 s)

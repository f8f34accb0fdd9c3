"""The algorithms. Importing this package sets up TensorFlow's quiet import (``common.process.startup``)
when TensorFlow is not imported yet, so that ``learn()`` called from Python starts as quietly as
``python -m run`` (``RUNNER_VERBOSE=1`` shows TensorFlow's lines)."""
import sys

from common.process.startup import quiet_tensorflow

if "tensorflow" not in sys.modules:
    quiet_tensorflow(())

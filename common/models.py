"""``common.models``, the name users of baselines import: the same module as ``common.nn.models``."""
import sys

import common.nn.models

sys.modules[__name__] = common.nn.models

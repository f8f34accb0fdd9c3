"""``common.policies``, the name users of baselines import: the same module as ``common.nn.policies``."""
import sys

import common.nn.policies

sys.modules[__name__] = common.nn.policies

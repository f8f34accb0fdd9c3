"""``common.tf_util``, the name users of baselines import: the same module as ``common.nn.tf_util``."""
import sys

import common.nn.tf_util

sys.modules[__name__] = common.nn.tf_util

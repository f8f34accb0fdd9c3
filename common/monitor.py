"""``common.monitor``, the name users of baselines import: the same module as ``common.wrappers.monitor``."""
import sys

import common.wrappers.monitor

sys.modules[__name__] = common.wrappers.monitor

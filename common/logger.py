"""``common.logger``, the name users of baselines import: the same module as ``common.logs.logger``."""
import sys

import common.logs.logger

sys.modules[__name__] = common.logs.logger

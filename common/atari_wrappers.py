"""``common.atari_wrappers``, the name users of baselines import: the same module as ``common.wrappers.atari_wrappers``."""
import sys

import common.wrappers.atari_wrappers

sys.modules[__name__] = common.wrappers.atari_wrappers

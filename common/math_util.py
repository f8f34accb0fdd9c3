"""Small numpy statistics shared by the algorithms."""
from __future__ import annotations

import numpy as np


def explained_variance(ypred: np.ndarray, y: np.ndarray) -> float:
    """1 - Var[y - ypred] / Var[y] (nan when Var[y] is 0)."""
    vary = np.var(y)
    return float("nan") if vary == 0 else float(1.0 - np.var(y - ypred) / vary)

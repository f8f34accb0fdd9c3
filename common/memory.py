"""The machine's available memory, and the one-line refusal of an allocation that cannot fit in it."""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from common.errors import ConfigError


def available_memory() -> int | None:
    """Bytes of memory this machine can still give (MemAvailable plus free swap), or None when unknown."""
    fields: dict[str, int] = {}
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in ("MemAvailable", "SwapFree"):
                    fields[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return fields["MemAvailable"] + fields.get("SwapFree", 0) if "MemAvailable" in fields else None


def gib(nbytes: float) -> str:
    """``nbytes`` as GiB with one decimal, e.g. '74.5 GiB'."""
    return f"{nbytes / 2**30:.1f} GiB"


def row_bytes(arrays: Iterable[tuple[tuple[int, ...], Any]]) -> int:
    """Bytes of one row of arrays given as (shape of a row, dtype)."""
    return sum(math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in arrays)


def check_fits(rows: int, bytes_per_row: int, what: str, setting: str) -> None:
    """ConfigError, before allocating, when ``rows`` rows of ``bytes_per_row`` bytes need more memory than
    ``available_memory()``; the message says both amounts and how low ``setting`` must go."""
    available, needed = available_memory(), rows * bytes_per_row
    if available is None or needed <= available:
        return
    raise ConfigError(f"{what} needs {gib(needed)} for {setting}={rows} ({bytes_per_row} bytes per row); this "
                      f"machine has {gib(available)} of memory available: lower {setting} "
                      f"(at most {available // max(1, bytes_per_row)} rows fit)")

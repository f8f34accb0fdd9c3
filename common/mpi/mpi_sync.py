"""Keeping the ranks of an MPI job in step: normalisation statistics and logged values.

Both functions are collectives (every rank calls them, in the same order) and cheap no-ops for a
single process. They sit on top of ``common.mpi.mpi_util`` so that ``common.vec_env`` never imports it.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from common.mpi import mpi_util


def combine_vec_normalize(vec_normalize: Any) -> None:
    """Merge a VecNormalize's observation and return statistics across ranks (incrementally).

    Call after every rollout so that all ranks normalise with the same numbers. ``None`` is allowed
    (no VecNormalize in the env): nothing happens.
    """
    if vec_normalize is None or mpi_util.size() == 1:
        return
    obs = vec_normalize.obs_rms
    if isinstance(obs, dict):
        items = [obs[k] for k in sorted(obs)]
    else:
        items = [] if obs is None else [obs]
    for rms in [vec_normalize.ret_rms, *items]:
        mpi_util.combine_running_mean_std(rms)


def mean_over_ranks(values: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """Count-weighted means of named values over all ranks (every rank gets the same dict).

    A value with count 0 or a nan value (no episode finished yet on this rank, say) is left out, so
    one rank without data does not turn the mean into nan; a name no rank has data for gets nan.

    Args:
        values: name -> (value, count), e.g. {"rollout/ep_rew_mean": (mean_return, n_episodes)}.
    """
    local = {k: (float(v), float(c)) for k, (v, c) in values.items() if c > 0 and not math.isnan(float(v))}
    merged = mpi_util.weighted_mean(local)
    return {k: float(merged.get(k, math.nan)) for k in values}

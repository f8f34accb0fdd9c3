"""Elo ratings from game results: the Bradley-Terry model fitted by gradient ascent (all games at once, so
the order games were played in does not matter), on the Elo scale (400 points: 10-to-1 odds)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ELO_SCALE = 400.0 / np.log(10.0)


def fit_elo(names: Sequence[str], games: Sequence[tuple[int, int, float, float]], anchor: int = 0,
            anchor_rating: float = 0.0, prior_games: float = 1.0, steps: int = 500) -> np.ndarray:
    """Ratings of ``names`` from ``games``: (i, j, points of i, games played) with points = wins + draws / 2.

    ``anchor``'s rating is fixed at ``anchor_rating``. ``prior_games`` virtual draws of each player against
    the anchor keep ratings finite for players that never lost (or never won)."""
    n = len(names)
    i = np.array([g[0] for g in games] + [k for k in range(n) if k != anchor], np.int64)
    j = np.array([g[1] for g in games] + [anchor] * (n - 1), np.int64)
    played = np.array([g[3] for g in games] + [prior_games] * (n - 1), np.float64)
    points = np.array([g[2] for g in games] + [prior_games / 2] * (n - 1), np.float64)
    r = np.zeros(n)
    total = max(played.sum(), 1.0)
    for _ in range(steps):
        expected = played / (1.0 + np.exp(r[j] - r[i]))
        grad = np.bincount(i, points - expected, n) - np.bincount(j, points - expected, n)
        # step size from the curvature bound: each game's second derivative is at most played / 4
        curvature = np.bincount(i, played, n) + np.bincount(j, played, n)
        r += 4.0 * grad / np.maximum(curvature, 1e-9) * 0.5
        r -= r[anchor]
        if np.abs(grad).max() < 1e-6 * total:
            break
    return anchor_rating + ELO_SCALE * r

"""Segment trees against brute-force numpy references, including after (repeated) updates."""

import numpy as np
import pytest

from common.buffers.segment_tree import MinSegmentTree, SumSegmentTree


def _brute_prefix_idx(values: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.cumsum(values), p, side="right")


@pytest.mark.parametrize("size", [1, 5, 8, 13])
def test_sum_and_min_match_brute_force_after_random_updates(size: int) -> None:
    rng = np.random.default_rng(size)
    s, m = SumSegmentTree(size), MinSegmentTree(size)
    ref = np.zeros(size)
    ref_min = np.full(size, np.inf)
    for _ in range(30):
        idx = rng.integers(0, size, size=rng.integers(1, 6))
        val = rng.random(idx.size) + 0.01
        s[idx] = val
        m[idx] = val
        for i, v in zip(idx, val):  # sequential semantics: last write wins
            ref[i] = v
            ref_min[i] = v
        assert s.sum() == pytest.approx(ref.sum())
        assert m.min() == pytest.approx(ref_min.min())
        lo = int(rng.integers(0, size))
        hi = int(rng.integers(lo, size + 1))
        assert s.sum(lo, hi) == pytest.approx(ref[lo:hi].sum())
        if hi > lo:
            assert m.min(lo, hi) == pytest.approx(ref_min[lo:hi].min())
        np.testing.assert_allclose(s[np.arange(size)], ref)


def test_repeated_index_in_one_update_keeps_last_value() -> None:
    s = SumSegmentTree(4)
    s[np.array([2, 2, 1, 2])] = np.array([5.0, 6.0, 1.0, 7.0])
    assert s[2] == 7.0
    assert s.sum() == 8.0


def test_find_prefixsum_idx_matches_searchsorted_including_after_update() -> None:
    rng = np.random.default_rng(0)
    s = SumSegmentTree(11)
    vals = rng.random(11)
    vals[3] = 0.0  # a zero leaf is never returned
    s[np.arange(11)] = vals
    p = rng.random(500) * vals.sum()
    np.testing.assert_array_equal(s.find_prefixsum_idx(p), _brute_prefix_idx(vals, p))
    s[np.array([0, 7])] = np.array([3.0, 0.0])
    vals[[0, 7]] = [3.0, 0.0]
    p = rng.random((4, 50)) * vals.sum()
    got = s.find_prefixsum_idx(p)
    assert got.shape == (4, 50)
    np.testing.assert_array_equal(got, _brute_prefix_idx(vals, p))
    assert not np.isin(got, [3, 7]).any()
    # exact boundaries: a prefix sum equal to the cumsum goes to the next leaf
    cs = np.cumsum(vals)
    np.testing.assert_array_equal(s.find_prefixsum_idx(cs[:2]), [1, 2])


def test_bad_index_and_capacity_raise() -> None:
    with pytest.raises(ValueError, match="capacity"):
        SumSegmentTree(0)
    s = SumSegmentTree(3)
    with pytest.raises(IndexError):
        s[3] = 1.0
    with pytest.raises(IndexError):
        s.sum(2, 1)

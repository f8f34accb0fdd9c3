"""Prioritized replay: sampling distribution, importance weights and priority updates vs brute force."""

import numpy as np
import pytest

from common.buffers.prioritized import PrioritizedReplayBuffer


def _filled(size: int = 8, n: int = 6, alpha: float = 0.6) -> PrioritizedReplayBuffer:
    buf = PrioritizedReplayBuffer(size, obs_shape=(2,), alpha=alpha)
    obs = np.arange(n, dtype=np.float32)[:, None].repeat(2, axis=1)
    buf.add(obs, np.arange(n) % 2, np.ones(n, np.float32), obs + 1, np.zeros(n, np.float32))
    return buf


def test_new_rows_get_the_max_priority_seen() -> None:
    buf = _filled()
    buf.update_priorities(np.array([0]), np.array([4.0]))
    buf.add(np.zeros((1, 2)), np.zeros(1), np.zeros(1), np.zeros((1, 2)), np.zeros(1))
    assert buf.max_priority == 4.0
    assert buf._sum[6] == pytest.approx(4.0**0.6)


def test_sampling_frequencies_match_priorities_after_updates() -> None:
    rng = np.random.default_rng(1)
    alpha = 0.7
    buf = _filled(size=8, n=6, alpha=alpha)
    prio = np.array([1.0, 2.0, 0.5, 4.0, 1.0, 3.0])
    buf.update_priorities(np.arange(6), prio)
    prio[[2, 4]] = [6.0, 0.1]
    buf.update_priorities(np.array([2, 4, 4]), np.array([6.0, 9.0, 0.1]))  # last value wins
    expected = prio**alpha / np.sum(prio**alpha)
    idx = buf.sample_indices((400, 32), rng)
    assert idx.shape == (400, 32)
    freq = np.bincount(idx.ravel(), minlength=8) / idx.size
    np.testing.assert_allclose(freq[:6], expected, atol=0.01)
    assert freq[6:].sum() == 0  # rows never written are never sampled


def test_importance_weights_match_formula() -> None:
    buf = _filled(alpha=0.5)
    prio = np.array([1.0, 2.0, 0.5, 4.0, 1.0, 3.0])
    buf.update_priorities(np.arange(6), prio)
    beta = 0.4
    batch = buf.sample(16, np.random.default_rng(0), beta=beta)
    p = prio**0.5 / np.sum(prio**0.5)
    w = (6 * p) ** -beta
    w /= w.max()
    np.testing.assert_allclose(batch["weights"], w[batch["indices"]], rtol=1e-6)
    np.testing.assert_array_equal(batch["obs"][:, 0], batch["indices"].astype(np.float32))


def test_importance_weights_normalised_per_batch() -> None:
    buf = _filled(alpha=0.5)
    prio = np.array([1.0, 2.0, 0.5, 4.0, 1.0, 3.0])
    buf.update_priorities(np.arange(6), prio)
    beta = 0.7
    batch = buf.sample((3, 4), np.random.default_rng(0), beta=beta, normalise="batch")
    p = prio**0.5 / np.sum(prio**0.5)
    w = (6 * p[batch["indices"]]) ** -beta
    np.testing.assert_allclose(batch["weights"], w / w.max(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(batch["weights"].max(axis=1), 1.0)
    with pytest.raises(ValueError, match="'buffer' or 'batch'"):
        buf.sample(4, np.random.default_rng(0), beta=beta, normalise="max")


def test_wrap_around_overwritten_row_gets_max_priority() -> None:
    buf = _filled(size=4, n=4, alpha=1.0)
    buf.update_priorities(np.arange(4), np.array([0.1, 0.2, 0.3, 0.4]))
    buf.add(np.zeros((1, 2)), np.zeros(1), np.zeros(1), np.zeros((1, 2)), np.zeros(1))  # overwrites row 0
    assert buf._sum[0] == pytest.approx(1.0)
    assert buf._sum.sum() == pytest.approx(1.9)
    assert buf._min.min() == pytest.approx(0.2)


def test_bad_priorities_raise() -> None:
    buf = _filled()
    with pytest.raises(ValueError, match="positive"):
        buf.update_priorities(np.array([0]), np.array([0.0]))
    with pytest.raises(IndexError):
        buf.update_priorities(np.array([7]), np.array([1.0]))
    with pytest.raises(ValueError, match="empty"):
        PrioritizedReplayBuffer(4, (2,)).sample(2, np.random.default_rng(0))

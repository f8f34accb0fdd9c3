"""Run under `mpiexec -n K`: checks every collective of common.mpi.mpi_util against numpy on one process.

Each rank derives its data from its rank, so any rank can rebuild every other rank's data and check
the collective result against a local computation. Exits 0 and prints "collectives ok" on rank 0.
"""

import multiprocessing
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from common.mpi import mpi_util
from common.running_mean_std import RunningMeanStd

R, K = mpi_util.rank(), mpi_util.size()


def gradients(r: int) -> list[np.ndarray]:
    """Deterministic per-rank "gradients" of a small network, float32 like TF variables."""
    rng = np.random.default_rng(100 + r)
    return [rng.standard_normal(s).astype(np.float32) for s in [(4, 64), (64,), (64, 2), (2,)]]


def samples(r: int, n_extra: int = 0) -> np.ndarray:
    """Rank r's observations: a different number of rows per rank, shape (n, 3)."""
    rng = np.random.default_rng(1000 + r + 7 * n_extra)
    return rng.normal(loc=[1.0, -2.0, 50.0], scale=[0.5, 3.0, 0.01], size=(5 + 3 * r + n_extra, 3))


def same_on_all_ranks(arr: np.ndarray) -> bool:
    """True when arr is bit-identical on every rank."""
    raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    table = np.empty((K, raw.size), dtype=np.uint8)
    mpi_util.get_comm().Allgather(raw, table)
    return bool(np.all(table == table[0]))


def check_ranks() -> None:
    assert K == int(os.environ["PMI_SIZE"]), (K, os.environ["PMI_SIZE"])
    assert R == int(os.environ["PMI_RANK"]), (R, os.environ["PMI_RANK"])
    assert mpi_util.is_root() == (R == 0)
    assert mpi_util.setup_process_seed(7) == 7 + 10000 * R
    assert mpi_util.setup_process_seed(None) is None
    ranks = mpi_util.allreduce_sum(np.array([R, 1], dtype=np.int64))
    assert ranks.dtype == np.int64 and ranks.tolist() == [K * (K - 1) // 2, K], ranks


def check_allreduce_mean() -> None:
    mine = gradients(R)
    for got, local in zip([mpi_util.allreduce_mean(g) for g in mine], mine, strict=True):
        assert got.dtype == np.float32 and got.shape == local.shape
        assert same_on_all_ranks(got)
    for i, got in enumerate(mpi_util.allreduce_mean(g) for g in mine):
        expected = sum(gradients(r)[i] for r in range(K)) / np.float32(K)
        if K == 2:  # a + b is exact in any order: bitwise equal to numpy
            np.testing.assert_array_equal(got, expected)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert np.all(mine[0] == gradients(R)[0]), "allreduce_mean modified its input"
    ints = mpi_util.allreduce_mean(np.array([R, 2 * R]))
    assert ints.dtype == np.float64 and ints.tolist() == [(K - 1) / 2, K - 1.0]


def check_broadcast() -> None:
    rng = np.random.default_rng(R)
    mine = [rng.standard_normal((3, 5)).astype(np.float32), rng.integers(0, 100, size=7),
            np.array(R * 1.5), np.empty((0, 4)), rng.standard_normal((2, 3)).T]  # last one non-contiguous
    for root in range(K):
        got = mpi_util.broadcast_arrays(mine, root=root)
        ref_rng = np.random.default_rng(root)
        ref = [ref_rng.standard_normal((3, 5)).astype(np.float32), ref_rng.integers(0, 100, size=7),
               np.array(root * 1.5), np.empty((0, 4)), ref_rng.standard_normal((2, 3)).T]
        for g, r, m in zip(got, ref, mine, strict=True):
            assert g.dtype == m.dtype and g.shape == m.shape
            assert g.tobytes() == r.tobytes(), (root, g, r)
            assert same_on_all_ranks(g)
    if K == 1:
        return
    bad = [np.zeros(3 + (R == K - 1))]
    try:
        mpi_util.broadcast_arrays(bad)
    except ValueError as exc:
        assert "differ" in str(exc)
    else:
        raise AssertionError("layout mismatch was not detected")


def check_moments() -> None:
    everything = np.concatenate([samples(r) for r in range(K)])
    mean, std, count = mpi_util.mpi_moments(samples(R), axis=0)
    assert count == len(everything)
    np.testing.assert_allclose(mean, everything.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std, everything.std(axis=0), rtol=1e-10)
    assert same_on_all_ranks(mean) and same_on_all_ranks(std)
    mean1, std1, count1 = mpi_util.mpi_moments(samples(R).T, axis=1)
    np.testing.assert_allclose(mean1, mean, rtol=1e-12)
    np.testing.assert_allclose(std1, std, rtol=1e-10)
    assert count1 == count
    empty_here = samples(R) if R != 0 else np.empty((0, 3))
    if K == 1:
        try:
            mpi_util.mpi_moments(empty_here)
        except ValueError as exc:
            assert "no samples" in str(exc)
            return
        raise AssertionError("mpi_moments accepted zero samples")
    rest = np.concatenate([samples(r) for r in range(1, K)])
    mean2, std2, count2 = mpi_util.mpi_moments(empty_here)
    assert count2 == len(rest)
    np.testing.assert_allclose(mean2, rest.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std2, rest.std(axis=0), rtol=1e-10)


def check_running_mean_std() -> None:
    rms = RunningMeanStd(shape=(3,))
    rms.update(samples(R))
    mpi_util.combine_running_mean_std(rms)
    # K pseudo-counts of (mean 0, var 1, count 1e-4) merged are one of count K * 1e-4.
    ref = RunningMeanStd(epsilon=K * 1e-4, shape=(3,))
    ref.update(np.concatenate([samples(r) for r in range(K)]))
    for rnd in range(1, 3):  # later rounds: only the new data is merged, nothing twice
        np.testing.assert_allclose(rms.mean, ref.mean, rtol=1e-10)
        np.testing.assert_allclose(rms.var, ref.var, rtol=1e-8)
        assert abs(rms.count - ref.count) < 1e-6, (rms.count, ref.count)
        assert same_on_all_ranks(rms.mean) and same_on_all_ranks(rms.var)
        rms.update(samples(R, n_extra=rnd))
        rms.update(samples(R, n_extra=rnd + 10))
        mpi_util.combine_running_mean_std(rms)
        ref.update(np.concatenate([samples(r, n_extra=rnd) for r in range(K)]
                                  + [samples(r, n_extra=rnd + 10) for r in range(K)]))


def check_weighted_mean() -> None:
    got = mpi_util.weighted_mean({"loss": (R + 1.0, R + 1), f"only{R}": (np.float32(R), 1),
                                  "name": (f"rank{R}", 1)})
    expected = sum((r + 1.0) ** 2 for r in range(K)) / sum(r + 1.0 for r in range(K))
    assert abs(got["loss"] - expected) < 1e-12, (got, expected)
    assert got["name"] == "rank0"
    assert all(got[f"only{r}"] == float(r) for r in range(K))
    assert len(got) == K + 2


def check_objects() -> None:
    """Picklable values of different sizes per rank: gathered in rank order, broadcast from any root."""
    got = mpi_util.allgather_object({"rank": R, "data": list(range(R * 3))})
    assert got == [{"rank": r, "data": list(range(r * 3))} for r in range(K)], got
    for root in range(K):
        value = mpi_util.broadcast_object(("from", R, "x" * (R * 100)), root=root)
        assert value == ("from", root, "x" * (root * 100)), value


def _child_view(queue) -> None:
    queue.put((mpi_util.rank(), mpi_util.size(), mpi_util.get_comm() is None))


def check_forked_child() -> None:
    """A forked child (a SubprocVecEnv worker) is a single process, never a member of the job."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_view, args=(queue,))
    child.start()
    got = queue.get(timeout=30)
    child.join(timeout=30)
    assert got == (0, 1, True), got


def main() -> None:
    with mpi_util.abort_on_failure():
        for check in (check_ranks, check_allreduce_mean, check_broadcast, check_moments,
                      check_running_mean_std, check_weighted_mean, check_objects, check_forked_child):
            check()
            mpi_util.barrier()
        if mpi_util.is_root():
            print(f"collectives ok on {K} ranks", flush=True)


if __name__ == "__main__":
    main()

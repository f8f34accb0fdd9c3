"""The training-state checkpoint format (common/files/checkpoint.py): round trips of buffers and generators,
filled rows only, and reading bounded by what the live run holds."""
import os

import numpy as np
import pytest

from common.buffers.prioritized import PrioritizedReplayBuffer
from common.files.checkpoint import (
    CheckpointError,
    GeneratorState,
    Values,
    newest_usable,
    open_checkpoint,
    read_state,
    write_checkpoint,
)


def _filled(capacity: int, rows: int, seed: int = 0) -> PrioritizedReplayBuffer:
    rng = np.random.default_rng(seed)
    buf = PrioritizedReplayBuffer(capacity, (3,), (2,), np.float32, np.float32, alpha=0.6)
    buf.add(rng.standard_normal((rows, 3), np.float32), rng.standard_normal((rows, 2), np.float32),
            rng.standard_normal(rows).astype(np.float32), rng.standard_normal((rows, 3), np.float32),
            np.zeros(rows, np.float32))
    buf.update_priorities(np.arange(rows), rng.uniform(0.1, 2.0, rows))
    return buf


def _write(path, buf, rng, weights=None):
    weights = {"w": np.arange(4, dtype=np.float32)} if weights is None else weights
    write_checkpoint(path, {"algorithm": "test", "step": 7}, weights,
                     {"buffer": buf.state(), "rng": GeneratorState(rng).state(), "loop": Values(t=7, x=np.ones(2)).state()})


def test_round_trip_restores_buffer_priorities_generator_and_values(tmp_path):
    path = str(tmp_path / "0000000007-rank0.zip")
    buf, rng = _filled(1000, 10), np.random.default_rng(5)
    rng.random(3)
    _write(path, buf, rng)
    with np.load(path, allow_pickle=False) as archive:  # the filled rows only, not the capacity
        assert archive["_state/buffer/obs"].shape == (10, 3)
    fresh, rng2, loop = PrioritizedReplayBuffer(1000, (3,), (2,), np.float32, np.float32), np.random.default_rng(), Values(t=0, x=np.zeros(2))
    arrays, states = read_state(open_checkpoint(path), {"w": np.zeros(4, np.float32)},
                                {"buffer": fresh, "rng": GeneratorState(rng2), "loop": loop})
    fresh.load_state(states["buffer"])
    GeneratorState(rng2).load_state(states["rng"])
    loop.load_state(states["loop"])
    np.testing.assert_array_equal(arrays["w"], np.arange(4, dtype=np.float32))
    assert len(fresh) == 10 and loop.t == 7 and np.array_equal(loop.x, np.ones(2))
    for name in ("obs", "actions", "rewards", "next_obs"):
        np.testing.assert_array_equal(getattr(fresh, name), getattr(buf, name))
    assert rng2.random() == rng.random()
    a, b = np.random.default_rng(1), np.random.default_rng(1)  # prioritized sampling continues identically
    np.testing.assert_array_equal(fresh.sample_indices((4, 8), a), buf.sample_indices((4, 8), b))


def test_reading_is_bounded_by_the_live_run(tmp_path):
    path = str(tmp_path / "0000000007-rank0.zip")
    _write(path, _filled(1000, 10), np.random.default_rng())
    with pytest.raises(CheckpointError, match="does not fit this run"):  # 10 rows into a buffer of 5
        read_state(open_checkpoint(path), {"w": np.zeros(4, np.float32)},
                   {"buffer": PrioritizedReplayBuffer(5, (3,), (2,), np.float32, np.float32),
                    "rng": GeneratorState(np.random.default_rng()), "loop": Values(t=0, x=np.zeros(2))})
    with pytest.raises(CheckpointError, match="does not fit this run"):  # a weight of another shape
        read_state(open_checkpoint(path), {"w": np.zeros(5, np.float32)},
                   {"buffer": PrioritizedReplayBuffer(1000, (3,), (2,), np.float32, np.float32),
                    "rng": GeneratorState(np.random.default_rng()), "loop": Values(t=0, x=np.zeros(2))})


def test_truncated_newest_falls_back_and_model_files_are_refused(tmp_path):
    older, newer = str(tmp_path / "0000000007-rank0.zip"), str(tmp_path / "0000000009-rank0.zip")
    _write(older, _filled(100, 10), np.random.default_rng())
    _write(newer, _filled(100, 10), np.random.default_rng())
    with open(newer, "r+b") as f:
        f.truncate(os.path.getsize(newer) - 10)
    opened, notes = newest_usable(str(tmp_path), 0)
    assert opened.path == older and len(notes) == 1 and "0000000009-rank0.zip" in notes[0]
    from common.files.model_file import save_model_file

    save_model_file(newer, {"algorithm": "test"}, {"w": np.zeros(2)})
    with pytest.raises(CheckpointError, match="is a model file, not a training-state checkpoint"):
        open_checkpoint(newer)


def test_a_checkpoint_written_where_another_run_left_later_ones_is_kept(tmp_path):
    """A folder shared by runs (RUNNER_LOGDIR): the checkpoint just written and the older ones it keeps stay;
    another run's later steps go."""
    from common.files.checkpoint import checkpoint_path, checkpoints, remove_old

    for step in (100, 200, 5000, 6000):
        open(checkpoint_path(str(tmp_path), step, 0), "w").close()
    remove_old(str(tmp_path), 0, keep=2, written=200)
    assert [step for step, _ in checkpoints(str(tmp_path), 0)] == [200, 100]
    open(checkpoint_path(str(tmp_path), 300, 0), "w").close()
    remove_old(str(tmp_path), 0, keep=2)
    assert [step for step, _ in checkpoints(str(tmp_path), 0)] == [300, 200]

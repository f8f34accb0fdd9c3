"""MPI helpers: the only module that imports mpi4py, and only under mpiexec/mpirun.

Outside a launcher (no PMI_* / OMPI_* / PMIX_* / MV2_* variables in the environment) the process is
rank 0 of 1, mpi4py is never imported and every function is an exact no-op that returns copies of its
inputs. Under a launcher with size > 1, mpi4py is imported on first use; if it is missing, a clear
MpiUnavailableError is raised instead of silently running K independent copies of the job.

Every collective here (all functions except rank/size/is_root/get_comm/setup_process_seed) must be called
by all ranks, in the same order, with arrays of the same shape and dtype on every rank. Each is started
non-blocking and waited for in Python, so that SIGTERM or Ctrl-C still ends a rank whose peer was
interrupted before joining (a blocking MPI call would wait for that peer for ever).

While a rank waits, it also listens: a rank other than 0 whose run failed sends rank 0 its one-line error
(``tell_root``), which rank 0 raises as ``RankFailedError`` (it saves and speaks); and a wait longer than
``RUNNER_MPI_TIMEOUT`` seconds (default 600; 0: no limit) ends with ``RankFailedError`` naming the ranks
not heard from. Only waiting counts: a rank stepping its envs is not timed, and waiting ranks tell each
other every few seconds that they are still there.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from common import env_vars
from common.errors import ConfigError, UserError
from common.mpi.mpi_launch import launched_by_mpi, launcher_size
from common.process.signals import Terminated, arrived, raise_in_main
from common.running_mean_std import merge_moments

__all__ = [
    "MpiUnavailableError",
    "RankFailedError",
    "abort_on_failure",
    "allgather_object",
    "allreduce_mean",
    "allreduce_sum",
    "barrier",
    "broadcast_arrays",
    "broadcast_object",
    "collective_timeout",
    "combine_running_mean_std",
    "get_comm",
    "is_root",
    "mpi_moments",
    "rank",
    "setup_process_seed",
    "size",
    "tell_root",
    "weighted_mean",
]

class MpiUnavailableError(RuntimeError):
    """Started by an MPI launcher with several processes, but mpi4py cannot be used."""


class RankFailedError(UserError):
    """Another rank's run failed, or a rank stopped answering; the message names the rank. ``details``: the
    failing rank's traceback of its env, if any (for env_error.txt)."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


class _State:
    """Lazily resolved communicator; comm is None when running as a single process."""

    resolved = False
    pid = 0
    comm: Any = None
    rank = 0
    size = 1


_STATE = _State()
# Statistics of each RunningMeanStd right after its last combine (see combine_running_mean_std).
_RMS_SYNCED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _resolve() -> _State:
    """Decide once whether this process is part of a multi-process MPI job, importing mpi4py if so."""
    if _STATE.resolved:
        if _STATE.pid == os.getpid():
            return _STATE
        # A forked child (a SubprocVecEnv worker, say) is not an MPI rank: it must never join collectives.
        _STATE.comm, _STATE.rank, _STATE.size, _STATE.pid = None, 0, 1, os.getpid()
        return _STATE
    _STATE.pid = os.getpid()
    env = os.environ
    if launched_by_mpi(env):
        env_size = launcher_size(env)
        if env_size is None or env_size > 1:
            comm = _import_comm(env_size)
            _STATE.comm, _STATE.rank, _STATE.size = comm, comm.Get_rank(), comm.Get_size()
            if _STATE.size > 1:
                _install_abort_hook()
    _STATE.resolved = True
    return _STATE


def _import_comm(env_size: int | None) -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:
        what = f"{env_size} processes" if env_size else "several processes"
        raise MpiUnavailableError(
            f"started by mpiexec with {what} but mpi4py cannot be imported ({exc}); "
            "install it with `pip install mpi4py mpich` or run without mpiexec") from exc
    return MPI.COMM_WORLD


def get_comm() -> Any:
    """Return mpi4py's COMM_WORLD under a multi-process launch, else None.

    Under `mpiexec -n 1` this imports mpi4py on demand (returns None if it is not installed).
    A forked child of a rank gets None: it is not part of the job.
    """
    state = _resolve()
    if state.comm is None and launcher_size(os.environ) == 1:
        with contextlib.suppress(ImportError):
            from mpi4py import MPI
            state.comm = MPI.COMM_WORLD
    return state.comm


def rank() -> int:
    """Rank of this process in COMM_WORLD (0 without MPI)."""
    return _resolve().rank


def size() -> int:
    """Number of processes in COMM_WORLD (1 without MPI)."""
    return _resolve().size


def is_root() -> bool:
    """True on rank 0, the rank that logs and saves."""
    return _resolve().rank == 0


def setup_process_seed(seed: int | None) -> int | None:
    """Per-rank seed: seed + 10000 * rank (None stays None). The caller seeds its generators with it."""
    if seed is None:
        return None
    return int(seed) + 10000 * rank()


def _multi() -> Any:
    """The communicator when size > 1, else None (every collective below is a no-op then)."""
    state = _resolve()
    return state.comm if state.size > 1 else None


SPIN_TESTS = 1000  # tests of a pending collective before the wait starts sleeping between tests
SPIN_SLEEP_S = 5e-5


_ABANDONED: list[tuple[Any, ...]] = []  # requests left pending by a signal, with their buffers (see _wait)
TIMEOUT_VARIABLE = env_vars.MPI_TIMEOUT
DEFAULT_TIMEOUT_S = 600.0
LISTEN_S = 0.05  # how often a waiting rank reads its messages
_FAILED_TAG = 31_144  # point-to-point tag of a failed rank's error, sent to rank 0
_WAITING_TAG = 31_145  # tag of "still waiting" notices between waiting ranks


def collective_timeout() -> float:
    """Seconds a rank waits for a collective before naming the ranks not heard from (``RUNNER_MPI_TIMEOUT``,
    default 600; 0 or inf: no limit); ConfigError for a value that is not a number >= 0."""
    text = env_vars.env_text(TIMEOUT_VARIABLE)
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ConfigError(f"{TIMEOUT_VARIABLE}={text!r} must be a number of seconds >= 0 (0: no limit)")
    return value or float("inf")


class _Listener:
    """A waiting rank's ear and voice: sends "still waiting" notices to the other ranks every ``beat`` s,
    records when it last heard each of them, and takes the errors failed ranks send to rank 0."""

    def __init__(self, comm: Any) -> None:
        from mpi4py import MPI

        self.comm, self.any_source, self.rank = comm, MPI.ANY_SOURCE, comm.Get_rank()
        try:
            self.timeout = collective_timeout()
        except ConfigError:  # (the runner refuses it up front)
            self.timeout = DEFAULT_TIMEOUT_S
        self.beat = min(self.timeout / 10, 5.0)
        self.start = self.next_listen = time.monotonic()
        self.next_beat = self.start + self.beat
        self.heard: dict[int, float] = {}
        self.sends: list[Any] = []

    def listen(self) -> RankFailedError | None:
        """Read the messages that arrived and send a notice when due (at most every ``LISTEN_S``); the error
        that ends this rank's wait, if any: a failed rank's (rank 0) or a timeout."""
        now = time.monotonic()
        if now < self.next_listen:
            return None
        self.next_listen = now + LISTEN_S
        failure = self._read(now)
        if failure is not None:
            return failure
        if now >= self.next_beat:
            self.next_beat = now + self.beat
            self.sends = [r for r in self.sends if not r.Test()]
            self.sends += [self.comm.isend(self.rank, dest=other, tag=_WAITING_TAG)
                           for other in range(self.comm.Get_size()) if other != self.rank]
        return self._timed_out(now)

    def _read(self, now: float) -> RankFailedError | None:
        comm, status = self.comm, _status()
        while comm.iprobe(source=self.any_source, tag=_WAITING_TAG, status=status):
            self.heard[comm.recv(source=status.Get_source(), tag=_WAITING_TAG)] = now
        if self.rank == 0 and comm.iprobe(source=self.any_source, tag=_FAILED_TAG, status=status):
            sender, line, details = comm.recv(source=status.Get_source(), tag=_FAILED_TAG)
            prefix = f"rank {sender}: "
            return RankFailedError(line if line.startswith(prefix) else prefix + line, details)
        return None

    def _timed_out(self, now: float) -> RankFailedError | None:
        """Past the timeout: the error naming the ranks not heard from lately, on the rank that speaks (rank 0,
        else the lowest rank still heard from; after twice the timeout any rank)."""
        waited = now - self.start
        if waited < self.timeout:
            return None
        silent = [r for r in range(self.comm.Get_size())
                  if r != self.rank and now - self.heard.get(r, -np.inf) > 3 * self.beat]
        if any(r < self.rank and r not in silent for r in range(self.rank)) and waited < 2 * self.timeout:
            return None  # a lower rank is waiting too: it speaks
        who = "rank " + ", ".join(map(str, silent)) if silent else "no rank"
        return RankFailedError(f"{who} stopped answering: rank {self.rank} waited {waited:.0f} s for "
                               f"{'it' if len(silent) == 1 else 'them'} in a collective "
                               f"({TIMEOUT_VARIABLE}={self.timeout:g})")


def _status() -> Any:
    from mpi4py import MPI

    return MPI.Status()


def tell_root(line: str, details: str = "") -> bool:
    """On a rank other than 0 whose run failed with a one-line error: send it to rank 0, which saves the model,
    prints it (naming this rank) and ends the job, and wait for that end. Returns when rank 0 did not end the
    job within the collective timeout (it stopped answering): True, this rank then speaks itself. False at
    once on rank 0 and alone."""
    comm = _multi()
    if comm is None or comm.Get_rank() == 0:
        return False
    sent = comm.isend((comm.Get_rank(), line, details), dest=0, tag=_FAILED_TAG)
    listener = _Listener(comm)
    deadline = listener.start + min(listener.timeout, 10 * INTERRUPT_GRACE_S)
    while time.monotonic() < deadline:
        with contextlib.suppress(KeyboardInterrupt):  # the first signal is rank 0's to handle
            listener.listen()  # notices: the ranks still waiting know this one is alive
            sent.Test()
            time.sleep(LISTEN_S)
    return True


def _wait(request: Any, *buffers: Any) -> bool:
    """Wait for a non-blocking MPI request, testing it from Python; False if a signal ended the wait.

    Between tests the main thread runs its signal handlers (``common.process.signals`` raises ``Terminated``
    there). Another thread (TensorFlow's, running a ``numpy_function``) cannot: it stops waiting once
    ``signals.arrived()`` says a signal came, and returns False, so that the TensorFlow call ends normally
    and the main thread's handler then raises (an exception out of the op would be a TensorFlow error).
    Past the spinning, a ``_Listener`` hears the other ranks: its ``RankFailedError`` is raised in the main
    thread (handed to it from another thread, as a signal).
    A request left pending keeps its ``buffers`` alive for the rest of the process: MPI may still write
    into them.
    """
    in_main = threading.current_thread() is threading.main_thread()
    tests = 0
    listener = None
    try:
        while not request.Test():
            tests += 1
            if not in_main and arrived() is not None:
                _ABANDONED.append((request, *buffers))
                return False
            if tests > SPIN_TESTS:
                listener = listener or _Listener(_STATE.comm)
                failure = listener.listen()
                if failure is not None and in_main:
                    raise failure
                if failure is not None:
                    raise_in_main(failure)
                    _ABANDONED.append((request, *buffers))
                    return False
                time.sleep(SPIN_SLEEP_S)
    except BaseException:
        _ABANDONED.append((request, *buffers))
        raise
    return True


def _finish(request: Any, *buffers: Any) -> None:
    """``_wait``, for the collectives whose callers cannot go on with a partial result."""
    if not _wait(request, *buffers):
        raise Terminated(arrived() or signal.SIGTERM)


def barrier() -> None:
    """Block until every rank has reached this call."""
    comm = _multi()
    if comm is not None:
        _finish(comm.Ibarrier())


def allgather_object(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (any picklable value), in rank order, on every rank."""
    comm = _multi()
    if comm is None:
        return [obj]
    data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    sizes = np.empty(comm.Get_size(), dtype=np.int64)
    size_here = np.array([data.size], dtype=np.int64)
    _finish(comm.Iallgather(size_here, sizes), size_here, sizes)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    table = np.empty(int(sizes.sum()), dtype=np.uint8)
    _finish(comm.Iallgatherv(data, [table, (sizes.tolist(), offsets.tolist())]), data, table)
    return [pickle.loads(table[o:o + n].tobytes()) for o, n in zip(offsets, sizes)]


def broadcast_object(obj: Any, root: int = 0) -> Any:
    """Root's ``obj`` (any picklable value) on every rank; the other ranks' ``obj`` is ignored."""
    comm = _multi()
    if comm is None:
        return obj
    is_root_rank = comm.Get_rank() == root
    data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8) if is_root_rank else None
    length = np.array([0 if data is None else data.size], dtype=np.int64)
    _finish(comm.Ibcast(length, root=root), length)
    buffer = np.array(data) if is_root_rank else np.empty(int(length[0]), dtype=np.uint8)
    _finish(comm.Ibcast(buffer, root=root), buffer)
    return obj if is_root_rank else pickle.loads(buffer.tobytes())


def _numeric(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} needs an integer or float array, got dtype {arr.dtype}")
    return arr


def _allreduce_sum(arr: np.ndarray, comm: Any) -> np.ndarray | None:
    """Element-wise sum over all ranks; None when a signal ended the wait (outside the main thread)."""
    send = np.ascontiguousarray(arr)
    out = np.empty_like(send)
    return out if _wait(comm.Iallreduce(send, out), send, out) else None


def allreduce_sum(x: np.ndarray) -> np.ndarray:
    """Element-wise sum of x over all ranks (buffer Allreduce), returned as a new array of x's dtype.

    In a thread other than the main one, once a signal has come (the run is ending), x itself.
    """
    arr = _numeric(x, "allreduce_sum")
    comm = _multi()
    total = None if comm is None else _allreduce_sum(arr, comm)
    return np.array(arr, copy=True) if total is None else total


def allreduce_mean(x: np.ndarray) -> np.ndarray:
    """Element-wise mean of x over all ranks (e.g. gradients); integer input gives float64.

    In a thread other than the main one, once a signal has come (the run is ending), x itself.
    """
    arr = _numeric(x, "allreduce_mean")
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    comm = _multi()
    total = None if comm is None else _allreduce_sum(arr, comm)
    if total is None:
        return np.array(arr, copy=True)
    total /= total.dtype.type(comm.Get_size())
    return total


def broadcast_arrays(arrays: Sequence[np.ndarray], root: int = 0) -> list[np.ndarray]:
    """Copies of root's arrays on every rank, sent as one flat byte buffer (one Bcast).

    Every rank passes arrays of the same shapes and dtypes (its own parameters, say); a mismatch raises
    ValueError on all ranks rather than hanging or receiving garbage.
    """
    arrays = [np.asarray(a) for a in arrays]
    n = size()
    if not 0 <= root < n:
        raise ValueError(f"broadcast root {root} is not a rank of this job (size {n})")
    comm = _multi()
    if comm is None:
        return [np.array(a, copy=True) for a in arrays]
    layout = [(a.shape, a.dtype.str) for a in arrays]
    root_layout = broadcast_object(layout, root=root)
    mismatch = allreduce_sum(np.array([int(layout != root_layout)], dtype=np.int64))[0]
    if mismatch:
        raise ValueError(f"broadcast_arrays: {mismatch} rank(s) passed arrays whose shapes/dtypes differ "
                         f"from rank {root}'s {root_layout}; every rank must pass the same layout")
    if comm.Get_rank() == root:
        flat = np.concatenate([np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in arrays]
                              or [np.empty(0, np.uint8)])
    else:
        flat = np.empty(sum(a.nbytes for a in arrays), dtype=np.uint8)
    _finish(comm.Ibcast(flat, root=root), flat)
    out, offset = [], 0
    for a in arrays:
        out.append(np.frombuffer(flat, dtype=a.dtype, count=a.size, offset=offset).reshape(a.shape).copy())
        offset += a.nbytes
    return out


def mpi_moments(x: np.ndarray, axis: int | None = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """Mean, std and count of x along axis over the data of all ranks, as if concatenated.

    Two Allreduces: sums and counts first, then sums of squared deviations around the global mean
    (numerically like numpy's two-pass std). Ranks may hold different numbers of samples (even 0).

    Returns:
        (mean, std) as float64 arrays of x's shape without axis, and the total sample count.
    """
    arr = np.asarray(x, dtype=np.float64)
    if axis is None:
        arr, axis = arr.reshape(-1), 0
    if arr.ndim == 0:
        raise ValueError("mpi_moments needs an array with at least one axis, got a scalar")
    axis = axis % arr.ndim
    local = np.append(arr.sum(axis=axis).ravel(), arr.shape[axis])
    summed = allreduce_sum(local)
    count = round(float(summed[-1]))
    if count == 0:
        raise ValueError("mpi_moments got no samples on any rank")
    mean = (summed[:-1] / count).reshape(arr.shape[:axis] + arr.shape[axis + 1:])
    sq = np.square(arr - np.expand_dims(mean, axis)).sum(axis=axis)
    std = np.sqrt(allreduce_sum(sq.ravel()).reshape(sq.shape) / count)
    return mean, std, count


def _as_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def weighted_mean(name_to_value_count: Mapping[str, tuple[Any, float]]) -> dict[str, Any]:
    """Count-weighted mean of each named value over all ranks; every rank gets the same dict.

    Ranks may report different names. A name reported by one rank only keeps that value (as float).
    Values that are not numbers (strings, say) are taken from the lowest rank reporting them.
    A name reported by several ranks whose counts sum to 0 gets nan. Negative counts raise ValueError.
    """
    local = {}
    for name, (value, count) in name_to_value_count.items():
        count = float(count)
        if not count >= 0:
            raise ValueError(f"weighted_mean: count of {name!r} is {count}; counts must be >= 0")
        numeric = _as_float(value)
        local[name] = (value if numeric is None else numeric, count)
    gathered = allgather_object(local)
    contributions: dict[str, list[tuple[Any, float]]] = {}
    for per_rank in gathered:
        for name, value_count in per_rank.items():
            contributions.setdefault(name, []).append(value_count)
    result: dict[str, Any] = {}
    for name, pairs in contributions.items():
        if any(not isinstance(v, float) for v, _ in pairs) or len(pairs) == 1:
            result[name] = pairs[0][0]
        else:
            total = sum(c for _, c in pairs)
            result[name] = sum(v * c for v, c in pairs) / total if total > 0 else float("nan")
    return result


def combine_running_mean_std(rms: Any, incremental: bool = True) -> None:
    """Merge a RunningMeanStd's statistics across ranks, in place; every rank ends with the same numbers.

    Uses the parallel-variance formula, count weighted, over one Allgather of (count, mean, var).
    With incremental=True (the default) it is safe to call repeatedly (say after every update): only
    the data each rank added since the previous combine of this object is merged, so nothing is counted
    twice. The first combine merges everything, including each rank's initial epsilon pseudo-count.
    Use incremental=False after replacing the statistics (set_state) on some ranks.

    Args:
        rms: object with float64 `.mean`, `.var` arrays and a float `.count`
            (common.running_mean_std.RunningMeanStd).
        incremental: merge only what was added since the last combine of this object.
    """
    comm = _multi()
    if comm is None:
        return
    mean, var, count = np.asarray(rms.mean, np.float64), np.asarray(rms.var, np.float64), float(rms.count)
    base = _RMS_SYNCED.get(rms) if incremental else None
    if base is not None and (count < base[2] or mean.shape != base[0].shape):
        base = None
    head = [0.0, 0.0] if base is None else [1.0, base[2]]
    packed = np.concatenate([head, [count], mean.ravel(), var.ravel()])
    table = np.empty((comm.Get_size(), packed.size), dtype=np.float64)
    _finish(comm.Iallgather(packed, table), packed, table)
    # Incremental only when every rank holds the same record of the last combine.
    use_base = base is not None and bool(np.all(table[:, 0] == 1.0)) and bool(np.all(table[:, 1] == base[2]))
    total_m, total_v, total_c = base if use_base else (np.zeros_like(mean), np.zeros_like(var), 0.0)
    for row in table:
        r_m, r_v = row[3:3 + mean.size].reshape(mean.shape), row[3 + mean.size:].reshape(mean.shape)
        r_c = float(row[2])
        if use_base:
            r_m, r_v, r_c = _unmerge(r_m, r_v, r_c, *base)
        if r_c == 0.0:  # nothing from this rank
            continue
        if total_c == 0.0:
            total_m, total_v, total_c = r_m.copy(), r_v.copy(), r_c
        else:
            total_m, total_v, total_c = merge_moments(total_m, total_v, total_c, r_m, r_v, r_c)
    rms.mean, rms.var, rms.count = np.array(total_m), np.array(total_v), float(total_c)
    _RMS_SYNCED[rms] = (rms.mean.copy(), rms.var.copy(), rms.count)


def _unmerge(m: np.ndarray, v: np.ndarray, n: float, m_a: np.ndarray, v_a: np.ndarray,
             n_a: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Moments of the samples added to (m_a, v_a, n_a) to reach (m, v, n): the inverse of merge_moments."""
    n_b = n - n_a
    if n_b <= 0.0:
        return np.zeros_like(m), np.zeros_like(v), 0.0
    m_b = (m * n - m_a * n_a) / n_b
    m2_b = v * n - v_a * n_a - np.square(m_b - m_a) * (n_a * n_b / n)
    return m_b, np.maximum(m2_b / n_b, 0.0), n_b


def _install_abort_hook() -> None:
    """Make an uncaught exception on one rank abort the whole job instead of leaving the others hung."""
    previous = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        previous(exc_type, exc, tb)
        if _multi() is not None:
            _abort(1)

    sys.excepthook = hook


def _abort(code: int) -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    time.sleep(0.2)  # let mpiexec forward this rank's last words before MPI_Abort tears the job down
    _STATE.comm.Abort(code)
    os._exit(code)  # MPICH's Abort can return before the launcher acts: this rank must not run on


INTERRUPT_GRACE_S = 60.0
_SAVED_TAG = 31_143  # point-to-point tag of rank 0's "saved, leave now" message


def exit_after_interrupt(code: int) -> None:
    """End this process with ``code`` after Ctrl-C or SIGTERM/SIGHUP (which mpiexec gives every rank).

    Alone: ``sys.exit(code)``. Under MPI, rank 0 (which saved the model and said so) tells every other
    rank to leave and then leaves; the others wait for that message (up to ``INTERRUPT_GRACE_S``, then
    abort the job), so that none ends the job while rank 0 is still saving, no rank prints anything, and
    no rank is left for the launcher to kill (MPICH's mpiexec does not always do so after a signal).
    """
    comm = _multi()
    if comm is None:
        sys.exit(code)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    if comm.Get_rank() == 0:
        sends = [comm.isend(code, dest=other, tag=_SAVED_TAG) for other in range(1, comm.Get_size())]
        deadline = time.monotonic() + 5.0
        while not all(request.Test() for request in sends) and time.monotonic() < deadline:
            time.sleep(0.01)
        os._exit(code)
    message = comm.irecv(source=0, tag=_SAVED_TAG)
    deadline = time.monotonic() + INTERRUPT_GRACE_S
    while time.monotonic() < deadline:
        with contextlib.suppress(KeyboardInterrupt):  # (common.process.signals ignores further signals by now)
            if message.Test():
                os._exit(code)
            time.sleep(0.01)
    _abort(code)


@contextlib.contextmanager
def abort_on_failure() -> Iterator[None]:
    """Context manager for a rank's main: any exception or non-zero sys.exit aborts all ranks.

    Without it, one rank failing (even with a clean one-line error and exit code 2) leaves the others
    waiting forever in their next collective. A no-op for a single process.
    """
    try:
        yield
    except SystemExit as exc:
        code = exc.code
        if code in (None, 0) or _multi() is None:
            raise
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        _abort(code)
    except BaseException:
        if _multi() is None:
            raise
        traceback.print_exc()
        _abort(1)

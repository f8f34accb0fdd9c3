"""SubprocVecEnv: envs stepped in worker processes, ``in_series`` envs per worker.

Observations, rewards, dones and (for Box/Discrete/MultiDiscrete/MultiBinary action spaces) actions live
in one shared memory block; each step costs one 1-byte command per worker and one reply that is empty
unless some env returned a non-empty info. Dead workers are noticed through their process sentinel.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import select
import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.reduction import send_handle
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np

from common.vec_env.base import (
    AlreadySteppingError,
    EnvWorkerError,
    Indices,
    VecEnv,
    VecObs,
    VecStepReturn,
)
from common.vec_env.main_reimport import (
    REIMPORTED_MAIN_EXIT,
    WORKER_NAME_PREFIX,
    leave_if_reimporting_main,
    reimport_message,
)
from common.vec_env.shared_buffers import create_block, plan_layout, views
from common.vec_env.subproc_worker import worker_main
from common.vec_env.util import (
    CloudpickleWrapper,
    check_env_fns,
    clear_mpi_env_vars,
    dict_to_obs,
    obs_space_info,
)
from common.wrappers.action_mask import unpack_mask

CLOSE_TIMEOUT_S = 3.0


def _shutdown(procs: list, conns: list[Connection], timeout: float = CLOSE_TIMEOUT_S) -> None:
    """Ask workers to quit, then terminate and kill what is left; bounded by about ``timeout`` + 1 s."""
    for conn in conns:
        try:
            conn.send_bytes(b"q")
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(0.5)
        if p.is_alive():
            p.kill()
            p.join(0.5)
    for conn in conns:
        conn.close()


class SubprocVecEnv(VecEnv):
    """Runs ``len(env_fns)`` envs in ``len(env_fns) // in_series`` worker processes.

    Args:
        env_fns: callables that each build a new gymnasium env (pickled with cloudpickle).
        context: multiprocessing start method: "forkserver" (default; safe once TensorFlow has started
            threads), "spawn" or "fork".
        in_series: envs stepped one after the other in each worker; must divide ``len(env_fns)``.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], context: str = "forkserver",
                 in_series: int = 1) -> None:
        leave_if_reimporting_main()  # a worker re-running a script without the main guard
        env_fns = list(env_fns)
        check_env_fns(env_fns)
        n = len(env_fns)
        if not isinstance(in_series, int) or in_series < 1 or n % in_series:
            raise ValueError(f"in_series={in_series!r} must be a positive divisor of the number of envs ({n})")
        if context not in mp.get_all_start_methods():
            raise ValueError(f"unknown start method {context!r}; use one of {mp.get_all_start_methods()}")
        ctx = mp.get_context(context)
        if context == "forkserver":
            ctx.set_forkserver_preload(["common.vec_env.subproc_worker"])
        self._in_series = in_series
        self._procs: list[Any] = []
        self._conns: list[Connection] = []
        self._dead: dict[int, str] = {}
        self._finalizer = weakref.finalize(self, _shutdown, self._procs, self._conns)
        with clear_mpi_env_vars():
            for w in range(n // in_series):
                parent_end, child_end = ctx.Pipe(duplex=True)
                fns = CloudpickleWrapper(env_fns[w * in_series:(w + 1) * in_series])
                proc = ctx.Process(target=worker_main, daemon=True, name=f"{WORKER_NAME_PREFIX}{w}",
                                   args=(child_end, parent_end if context == "fork" else None, fns, w * in_series))
                proc.start()
                child_end.close()
                self._procs.append(proc)
                self._conns.append(parent_end)
        self._fd_to_worker: dict[int, int] = {}
        self._poller = select.poll()
        for w, (conn, proc) in enumerate(zip(self._conns, self._procs)):
            self._poller.register(conn.fileno(), select.POLLIN)
            self._poller.register(proc.sentinel, select.POLLIN)
            self._fd_to_worker[conn.fileno()] = w
            self._fd_to_worker[proc.sentinel] = w
        try:
            replies = self._gather(range(len(self._conns)))
        except BaseException:
            self._finalizer()
            raise
        obs_space, act_space, _ = replies[0]
        super().__init__(n, obs_space, act_space)
        for w, (o, a, rest) in enumerate(replies):
            for k, (o2, a2) in enumerate([(o, a), *rest]):
                if o2 != obs_space or a2 != act_space:
                    self._finalizer()
                    raise ValueError(f"env {w * in_series + k} has spaces ({o2}, {a2}) but env 0 has "
                                     f"({obs_space}, {act_space}); all envs must match")
        self._keys = obs_space_info(obs_space)[0]
        specs, size = plan_layout(n, obs_space, act_space)
        fd, self._block = create_block(size)
        try:
            header = b"m" + pickle.dumps((specs, size))
            for conn, proc in zip(self._conns, self._procs):
                conn.send_bytes(header)
                send_handle(conn, fd, proc.pid)
        finally:
            os.close(fd)
        arrays = views(self._block, specs)
        self._obs = {k: arrays[("obs", k)] for k in self._keys}
        self._rew = arrays[("rew", None)]
        self._done = arrays[("done", None)]
        self._act = arrays.get(("act", None))

    # --- transport ---------------------------------------------------------------------------
    def _send(self, msg: bytes, workers: Sequence[int] | None = None) -> list[int]:
        workers = range(len(self._conns)) if workers is None else workers
        for w in workers:
            self._check_alive(w)
        for w in workers:
            try:
                self._conns[w].send_bytes(msg)
            except (OSError, ValueError):
                self._mark_dead(w)
        return list(workers)

    def _gather(self, workers: Sequence[int]) -> list[Any]:
        """Wait for one reply from each of ``workers``; raise the first error after all answered."""
        pending = {w for w in workers if w not in self._dead}
        raw: dict[int, bytes] = {}
        while pending:
            for fd, _ in self._poller.poll():
                w = self._fd_to_worker.get(fd)
                if w not in pending:
                    continue
                conn = self._conns[w]
                if fd == conn.fileno() or conn.poll(0):
                    try:
                        raw[w] = conn.recv_bytes()
                    except (EOFError, OSError):
                        self._mark_dead(w)
                else:
                    self._mark_dead(w)
                pending.discard(w)
        error: EnvWorkerError | None = None
        results = []
        for w in workers:
            if w in self._dead:
                error = error or self._dead_error(w)
                results.append(None)
                continue
            msg = raw[w]
            tag = msg[:1]
            if tag == b"E":
                index, tb, what = pickle.loads(msg[1:])
                error = error or EnvWorkerError(f"env {index} {what} (in its worker process)", index, tb)
                results.append(None)
            elif tag == b"I" or tag == b"R":
                results.append(pickle.loads(msg[1:]))
            else:
                results.append(None)
        if error is not None:
            raise error
        return results

    def _mark_dead(self, w: int) -> None:
        if w in self._dead:
            return
        proc = self._procs[w]
        proc.join(0.1)
        self._dead[w] = f"exit code {proc.exitcode}" if proc.exitcode is not None else "its pipe broke"
        for fd in (self._conns[w].fileno(), proc.sentinel):
            try:
                self._poller.unregister(fd)
            except (KeyError, ValueError):
                pass

    def _dead_error(self, w: int) -> EnvWorkerError:
        lo = w * self._in_series
        envs = f"env {lo}" if self._in_series == 1 else f"envs {lo}-{lo + self._in_series - 1}"
        if self._procs[w].exitcode == REIMPORTED_MAIN_EXIT:
            return EnvWorkerError(reimport_message(f"the worker process of {envs}"), lo)
        return EnvWorkerError(f"the worker process of {envs} died ({self._dead[w]}); close this vec env "
                              "and create a new one", lo)

    def _check_alive(self, w: int) -> None:
        if w in self._dead:
            raise self._dead_error(w)

    # --- VecEnv API --------------------------------------------------------------------------
    def reset(self) -> VecObs:
        self._check_open()
        if self.waiting:
            raise AlreadySteppingError("reset() called while a step is pending; call step_wait() first")
        seeds = self._pop_seeds()
        k = self._in_series
        for w, conn in enumerate(self._conns):
            self._check_alive(w)
        for w, conn in enumerate(self._conns):
            conn.send_bytes(b"r" + pickle.dumps(seeds[w * k:(w + 1) * k]))
        infos = self._gather(range(len(self._conns)))
        self.reset_infos = [info for worker_infos in infos for info in worker_infos]
        return self._copy_obs()

    def step_async(self, actions: np.ndarray | Sequence[Any]) -> None:
        self._check_open()
        if self.waiting:
            raise AlreadySteppingError("step_async() called twice; call step_wait() before the next step")
        self._check_actions(actions)
        if self._act is not None:
            try:
                self._act[...] = np.asarray(actions).reshape(self._act.shape)
            except ValueError as e:
                raise ValueError(f"actions of shape {np.shape(actions)} do not fit the action space "
                                 f"{self.action_space} for {self.num_envs} envs: {e}") from None
            self._send(b"s")
        else:
            k = self._in_series
            for w in range(len(self._conns)):
                self._check_alive(w)
                self._conns[w].send_bytes(b"S" + cloudpickle.dumps(list(actions[w * k:(w + 1) * k])))
        self.waiting = True

    def step_wait(self) -> VecStepReturn:
        self._take_pending_step()
        reports = self._gather(range(len(self._conns)))
        infos: list[dict] = [{} for _ in range(self.num_envs)]
        for report in reports:
            if report:
                for i, info, reset_info in report:
                    infos[i] = unpack_mask(info)
                    if reset_info is not None:
                        self.reset_infos[i] = unpack_mask(reset_info)
        return self._copy_obs(), self._rew.copy(), self._done.copy(), infos

    def _copy_obs(self) -> VecObs:
        if self._keys == [None]:
            return self._obs[None].copy()
        return dict_to_obs(self.observation_space, {k: v.copy() for k, v in self._obs.items()})

    def _call(self, name: str, indices: Indices, *args: Any) -> list[Any]:
        self._check_open()
        if self.waiting:
            raise AlreadySteppingError(f"{name}() called while a step is pending; call step_wait() first")
        idx = self._indices(indices)
        k = self._in_series
        by_worker: dict[int, list[int]] = {}
        for i in idx:
            by_worker.setdefault(i // k, []).append(i % k)
        workers = list(by_worker)
        for w in workers:
            self._check_alive(w)
        for w in workers:
            self._conns[w].send_bytes(b"c" + cloudpickle.dumps((name, by_worker[w], args)))
        results = dict(zip(workers, self._gather(workers)))
        positions = {w: 0 for w in workers}
        out = []
        for i in idx:
            w = i // k
            out.append(results[w][positions[w]] if results[w] else None)
            positions[w] += 1
        return out

    def get_attr(self, name: str, indices: Indices = None) -> list[Any]:
        return self._call("get_attr", indices, name)

    def set_attr(self, name: str, value: Any, indices: Indices = None) -> None:
        self._call("set_attr", indices, name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None, **method_kwargs: Any) -> list[Any]:
        return self._call("env_method", indices, method_name, method_args, method_kwargs)

    def env_is_wrapped(self, wrapper_class: type, indices: Indices = None) -> list[bool]:
        return self._call("env_is_wrapped", indices, wrapper_class)

    def get_images(self) -> list[np.ndarray]:
        images = self._call("render", None)
        for i, img in enumerate(images):
            if img is None:
                raise ValueError(f"env {i} returned no image; make the envs with render_mode='rgb_array'")
        return [np.asarray(img) for img in images]

    def _seed_action_spaces(self, seeds: list[int | None]) -> None:
        k = self._in_series
        for w in range(len(self._conns)):
            local = list(range(k))
            self._check_alive(w)
            self._conns[w].send_bytes(b"c" + cloudpickle.dumps(("seed_action_space", local, (seeds[w * k:(w + 1) * k],))))
        self._gather(range(len(self._conns)))

    def close_extras(self) -> None:
        self.waiting = False
        self._finalizer()
        self._obs = self._rew = self._done = self._act = None  # type: ignore[assignment]

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the workers (for tests and diagnostics)."""
        return [p.pid for p in self._procs]

"""The loop run by each SubprocVecEnv worker process: builds its envs, then serves commands.

Wire protocol (``send_bytes`` frames; the first byte is a tag):
    parent -> worker: b"s" step (actions in shared memory), b"S"+pickle(actions) step,
                      b"r"+pickle(seeds) reset, b"c"+cloudpickle((name, args)) call, b"q" quit.
    worker -> parent: b"" step done, nothing to report; b"I"+pickle([(i, info, reset_info)]) step done
                      with non-empty infos; b"R"+cloudpickle(result); b"E"+pickle((env_index, traceback, description)).
"""

from __future__ import annotations

import contextlib
import mmap
import pickle
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle
from typing import Any

import cloudpickle
import gymnasium as gym

from common.vec_env.shared_buffers import map_block, views
from common.vec_env.util import (
    CloudpickleWrapper,
    call_env_method,
    check_env_spaces,
    describe_failure,
    get_env_attr,
    is_wrapped,
    obs_space_info,
    remove_mpi_env_vars,
    same_instance_message,
    set_env_attr,
    write_obs,
)
from common.wrappers.action_mask import pack_mask

EMPTY = b""


def _error(env_index: int) -> bytes:
    """The report of the exception being handled: env index, traceback and one-line description."""
    error = sys.exc_info()[1]
    what = describe_failure(error) if error is not None else "failed"
    return b"E" + pickle.dumps((env_index, traceback.format_exc(), what))


def _build_envs(conn: Connection, env_fns: list, first: int) -> list[gym.Env] | None:
    envs: list[gym.Env] = []
    for k, fn in enumerate(env_fns):
        try:
            env = fn()
            check_env_spaces(env)
            for j, other in enumerate(envs):
                if other is env:
                    raise ValueError(same_instance_message(first + j, first + k))
        except BaseException:  # noqa: BLE001 - any failure is reported to the parent
            conn.send_bytes(_error(first + k))
            return None
        envs.append(env)
    return envs


class _Worker:
    """State of one worker: its envs (global indices ``first..first+len(envs)-1``) and shared views."""

    def __init__(self, conn: Connection, envs: list[gym.Env], first: int) -> None:
        self.conn, self.envs, self.first = conn, envs, first
        self.keys = obs_space_info(envs[0].observation_space)[0]
        self.seeds: list[int | None] = [None] * len(envs)
        self.block: mmap.mmap | None = None

    def attach(self, specs: list, size: int) -> None:
        fd = recv_handle(self.conn)
        self.block = map_block(fd, size)
        arrays = views(self.block, specs)
        lo, hi = self.first, self.first + len(self.envs)
        self.obs = {k: arrays[("obs", k)][lo:hi] for k in self.keys}
        self.rew = arrays[("rew", None)][lo:hi]
        self.done = arrays[("done", None)][lo:hi]
        act = arrays.get(("act", None))
        self.act = act[lo:hi] if act is not None else None

    def step(self, actions: Any) -> bytes:
        report = []
        rew, done = self.rew, self.done
        for k, env in enumerate(self.envs):
            try:
                obs, r, terminated, truncated, info = env.step(actions[k])
                reset_info = None
                if terminated or truncated:
                    info["terminal_observation"] = obs
                    info["TimeLimit.truncated"] = bool(truncated and not terminated)
                    obs, reset_info = env.reset()
                    done[k] = True
                else:
                    done[k] = False
                rew[k] = r
                write_obs(self.obs, k, obs)
            except BaseException:  # noqa: BLE001 - any failure is reported to the parent
                return _error(self.first + k)
            if info or reset_info:
                report.append((self.first + k, pack_mask(info), reset_info and pack_mask(reset_info)))
        return b"I" + pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL) if report else EMPTY

    def reset(self, seeds: list[int | None]) -> bytes:
        infos = []
        for k, env in enumerate(self.envs):
            try:
                obs, info = env.reset(seed=seeds[k])
                write_obs(self.obs, k, obs)
            except BaseException:  # noqa: BLE001 - any failure is reported to the parent
                return _error(self.first + k)
            infos.append(info)
        return b"R" + cloudpickle.dumps(infos)

    def call(self, name: str, local: list[int], args: tuple) -> bytes:
        results = []
        for k in local:
            env = self.envs[k]
            try:
                if name == "get_attr":
                    results.append(get_env_attr(env, args[0]))
                elif name == "set_attr":
                    set_env_attr(env, args[0], args[1])
                elif name == "env_method":
                    results.append(call_env_method(env, args[0], args[1], args[2]))
                elif name == "env_is_wrapped":
                    results.append(is_wrapped(env, args[0]))
                elif name == "render":
                    results.append(env.render())
                elif name == "seed_action_space":
                    env.action_space.seed(args[0][k])
                else:
                    raise ValueError(f"unknown worker command {name!r}")
            except BaseException:  # noqa: BLE001 - any failure is reported to the parent
                return _error(self.first + k)
        return b"R" + cloudpickle.dumps(results)

    def serve(self) -> None:
        conn = self.conn
        while True:
            try:
                msg = conn.recv_bytes()
            except (EOFError, OSError):
                return  # parent went away
            tag = msg[:1]
            if tag == b"s":
                reply = self.step(self.act)
            elif tag == b"S":
                reply = self.step(pickle.loads(msg[1:]))
            elif tag == b"r":
                reply = self.reset(pickle.loads(msg[1:]))
            elif tag == b"c":
                name, local, args = cloudpickle.loads(msg[1:])
                reply = self.call(name, local, args)
            else:  # b"q"
                return
            conn.send_bytes(reply)

    def close(self) -> None:
        for env in self.envs:
            with contextlib.suppress(Exception):  # on the way out; the parent no longer listens
                env.close()


def worker_main(conn: Connection, parent_end: Connection | None, env_fns: CloudpickleWrapper, first: int) -> None:
    """Entry point of a worker process.

    Args:
        conn: this worker's end of the duplex pipe.
        parent_end: the parent's end, inherited under "fork" only; closed at once so EOF is seen.
        env_fns: the env factories of this worker.
        first: global index of this worker's first env.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes us
    remove_mpi_env_vars()
    if parent_end is not None:
        parent_end.close()
    envs = _build_envs(conn, env_fns.x, first)
    if envs is None:
        conn.close()
        return
    worker = _Worker(conn, envs, first)
    try:
        spaces_msg = (envs[0].observation_space, envs[0].action_space,
                      [(e.observation_space, e.action_space) for e in envs[1:]])
        conn.send_bytes(b"R" + cloudpickle.dumps(spaces_msg))
        msg = conn.recv_bytes()
        if msg[:1] != b"m":
            return
        specs, size = pickle.loads(msg[1:])
        worker.attach(specs, size)
        worker.serve()
    except (EOFError, OSError, KeyboardInterrupt):
        pass
    finally:
        worker.close()
        conn.close()

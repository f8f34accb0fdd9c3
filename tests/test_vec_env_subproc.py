"""SubprocVecEnv: same results as DummyVecEnv, clear errors, bounded close, no leftover processes."""

import multiprocessing as mp
import os
import signal
import time

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401
from common.vec_env import (
    AlreadySteppingError,
    ClosedVecEnvError,
    DummyVecEnv,
    EnvWorkerError,
    NotSteppingError,
    SubprocVecEnv,
)
from common.wrappers.monitor import Monitor
from tests.test_vec_env_helpers import FailingEnv, SleepyEnv, TupleEnv

N = 4


def _assert_same_obs(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    else:
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype


def _assert_same_info(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if k == "terminal_observation":
            _assert_same_obs(np.asarray(a[k]) if not isinstance(a[k], (dict, tuple)) else a[k],
                             np.asarray(b[k]) if not isinstance(b[k], (dict, tuple)) else b[k])
        elif k == "episode":
            assert a[k]["r"] == b[k]["r"] and a[k]["l"] == b[k]["l"]
        else:
            assert a[k] == b[k]


FACTORIES = {
    "cartpole": lambda: Monitor(gym.make("CartPole-v1", max_episode_steps=15)),
    "discrete": lambda: gym.make("envs:IdentityDiscrete-v0", max_episode_steps=5),
    "box": lambda: gym.make("envs:IdentityBox-v0", max_episode_steps=6),
    "multidiscrete": lambda: gym.make("envs:IdentityMultiDiscrete-v0", max_episode_steps=4),
    "dict": lambda: gym.make("envs:DictObs-v0", max_episode_steps=5),
    "tuple": TupleEnv,
}


@pytest.mark.parametrize("in_series", [1, 2, 4])
@pytest.mark.parametrize("kind", list(FACTORIES))
def test_identical_to_dummy(kind, in_series):
    fn = FACTORIES[kind]
    dummy = DummyVecEnv([fn] * N)
    sub = SubprocVecEnv([fn] * N, in_series=in_series)
    try:
        dummy.seed(3)
        sub.seed(3)
        _assert_same_obs(dummy.reset(), sub.reset())
        assert dummy.reset_infos == sub.reset_infos
        dones_seen = truncs_seen = 0
        for _ in range(25):
            actions = [dummy.action_space.sample() for _ in range(N)]
            if kind not in ("tuple",):
                actions = np.array(actions)
            d, s = dummy.step(actions), sub.step(actions)
            _assert_same_obs(d[0], s[0])
            np.testing.assert_array_equal(d[1], s[1])
            np.testing.assert_array_equal(d[2], s[2])
            assert s[1].dtype == np.float32 and s[2].dtype == bool
            for a, b in zip(d[3], s[3]):
                _assert_same_info(a, b)
            dones_seen += int(s[2].sum())
            truncs_seen += sum(bool(i.get("TimeLimit.truncated")) for i in s[3])
            assert dummy.reset_infos == sub.reset_infos
        assert dones_seen > 0
        if kind in ("discrete", "box", "multidiscrete", "dict"):
            assert truncs_seen == dones_seen  # these envs only ever end by the time limit
        if kind == "tuple":
            assert truncs_seen == 0  # TupleEnv terminates by itself
    finally:
        dummy.close()
        sub.close()
    assert not mp.active_children()


def _no_children_left():
    deadline = time.monotonic() + 3
    while mp.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not mp.active_children()


@pytest.mark.parametrize("where", ["init", "reset", "step"])
def test_env_exception_names_index_and_carries_traceback(where):
    fns = [FailingEnv, FailingEnv, lambda: FailingEnv(where), FailingEnv]
    venv = None
    t0 = time.monotonic()
    with pytest.raises(EnvWorkerError) as err:
        venv = SubprocVecEnv(fns, in_series=2)
        venv.reset()
        for _ in range(5):
            venv.step(np.zeros(N, dtype=np.int64))
    assert time.monotonic() - t0 < 3  # includes worker start-up
    assert err.value.env_index == 2
    assert str(err.value).startswith("env 2 raised RuntimeError: ")
    assert "(in its worker process)" in str(err.value).splitlines()[0]
    assert f"{where if where != 'init' else 'constructor'} exploded" in str(err.value)
    assert "Traceback" in err.value.worker_traceback
    if venv is not None:
        t0 = time.monotonic()
        venv.close()
        assert time.monotonic() - t0 < 3
    assert _no_children_left()


@pytest.mark.parametrize("how", ["sigkill", "exit"])
def test_dead_worker_gives_clear_error(how):
    venv = SubprocVecEnv([lambda: FailingEnv("exit" if how == "exit" else "", fail_step=2)] * N, in_series=2)
    venv.reset()
    venv.step([0] * N)
    if how == "sigkill":
        os.kill(venv.worker_pids[1], signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(EnvWorkerError, match="died") as err:
        venv.step([0] * N)
    assert time.monotonic() - t0 < 1
    assert err.value.env_index in (0, 2)
    with pytest.raises(EnvWorkerError, match="died"):
        venv.step([0] * N)  # still clear on the next call
    t0 = time.monotonic()
    venv.close()
    venv.close()
    assert time.monotonic() - t0 < 3
    assert _no_children_left()


def test_slow_env_is_waited_for():
    venv = SubprocVecEnv([SleepyEnv] * 2)
    venv.reset()
    _, rews, _, _ = venv.step([0, 0])
    np.testing.assert_array_equal(rews, [1, 1])
    venv.close()


def test_misuse_raises_clear_errors():
    venv = SubprocVecEnv([FailingEnv] * 2)
    venv.reset()
    with pytest.raises(ValueError, match="got 3 actions for 2 envs"):
        venv.step([0, 1, 0])
    with pytest.raises(NotSteppingError):
        venv.step_wait()
    venv.step_async([0, 1])
    with pytest.raises(AlreadySteppingError):
        venv.step_async([0, 1])
    venv.step_wait()
    venv.close()
    with pytest.raises(ClosedVecEnvError):
        venv.step([0, 1])
    with pytest.raises(ClosedVecEnvError):
        venv.get_attr("t")
    with pytest.raises(ValueError, match="in_series"):
        SubprocVecEnv([FailingEnv] * 3, in_series=2)
    assert _no_children_left()


_SHARED = {}


def _shared_env():
    return _SHARED.setdefault("env", FailingEnv())


def test_same_instance_refused():
    env = FailingEnv()
    with pytest.raises(ValueError, match="same env instance"):
        SubprocVecEnv([lambda: env] * 2)
    # not a captured instance, but the same object within one worker
    with pytest.raises(EnvWorkerError, match="same env instance"):
        SubprocVecEnv([_shared_env] * 2, in_series=2)
    assert _no_children_left()


def test_env_access_and_seed(monkeypatch):
    monkeypatch.setenv("PMI_RANK", "3")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    venv = SubprocVecEnv([lambda: Monitor(TupleEnv()), TupleEnv, TupleEnv, TupleEnv], in_series=2)
    assert venv.env_method("getenv", "PMI_RANK") == [None] * 4
    assert venv.env_method("getenv", "OMPI_COMM_WORLD_SIZE", indices=[3]) == [None]
    assert os.environ["PMI_RANK"] == "3"  # the parent keeps its own
    assert venv.env_is_wrapped(Monitor) == [True, False, False, False]
    venv.set_attr("t", 5, indices=[1, 2])
    assert venv.get_attr("t", indices=[2, 1]) == [5, 5]
    with pytest.raises(EnvWorkerError, match="env 0 raised") as err:
        venv.get_attr("t", indices=0)  # never set on env 0
    assert "has no attribute 't'" in err.value.worker_traceback
    assert venv.seed(10) == [10, 11, 12, 13]
    venv.reset()
    first = venv.reset_infos
    venv.seed(10)
    venv.reset()
    assert venv.reset_infos == first
    venv.close()


def test_render_rgb_array():
    venv = SubprocVecEnv([lambda: gym.make("CartPole-v1", render_mode="rgb_array")] * 2)
    venv.reset()
    imgs = venv.get_images()
    assert len(imgs) == 2 and imgs[0].ndim == 3
    h, w, c = imgs[0].shape
    assert venv.render("rgb_array").shape == (2 * h, w, c)
    venv.close()


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_other_start_methods(context):
    fn = FACTORIES["cartpole"]
    dummy, sub = DummyVecEnv([fn] * 2), SubprocVecEnv([fn] * 2, context=context)
    dummy.seed(0)
    sub.seed(0)
    _assert_same_obs(dummy.reset(), sub.reset())
    for _ in range(20):
        _assert_same_obs(dummy.step([1, 0])[0], sub.step([1, 0])[0])
    sub.close()
    assert _no_children_left()


GUARD = 'if __name__ == "__main__":'
RUN_WITHOUT_GUARD = """\
import run
print("script started")
run.main(["--alg=ppo2", "--env=CartPole-v1", "--num_env=2", "--vec_env=subproc", "--num_timesteps=512",
          "--log_path=LOG"])
"""
VEC_ENV_WITHOUT_GUARD = """\
import gymnasium as gym
from common.vec_env import SubprocVecEnv
print("script started")
SubprocVecEnv([lambda: gym.make("CartPole-v1")] * 2, context="spawn")
"""


@pytest.mark.parametrize("source", [RUN_WITHOUT_GUARD, VEC_ENV_WITHOUT_GUARD], ids=["run.main", "SubprocVecEnv"])
def test_script_without_main_guard_is_told_once(source, tmp_path):
    """A script starting subprocess envs at its top level (workers re-run it: forkserver, spawn) ends with
    one error naming the main guard: the workers leave at once (no traceback, no run of their own), and
    the script's output (stdout to a pipe, block-buffered as to a file) appears once."""
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(source.replace("LOG", str(tmp_path / "log")))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**env, "PYTHONPATH": root}, check=False)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and last.startswith("common.vec_env.base.EnvWorkerError: the worker process of env 0 re-ran")
    assert GUARD in last and str(script) in last, proc.stderr[-2000:]
    assert proc.stderr.count("Traceback") == 1  # the script's own, from the call that started the envs
    assert proc.stdout.count("script started") == 1
    assert proc.stdout.count("Logging to") == (source is RUN_WITHOUT_GUARD), proc.stdout

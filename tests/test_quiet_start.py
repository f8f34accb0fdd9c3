"""A quiet terminal: the documented commands print none of TensorFlow's start-up lines unless --verbose,
and --help imports no TensorFlow (common/process/startup.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from common.process.startup import is_chatter, verbose_requested

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# lines TensorFlow 2.21 printed on the CPU development machine before this was fixed
SEEN = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795468213.207682    1514 port.cc:153] oneDNN custom operations are on. You may see ...",
    ("I0000 00:00:1795468213.208111    1514 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
     "GPU will not be used."),
    ("To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other operations, "
     "rebuild TensorFlow with the appropriate compiler flags."),
]
TF_LINE_MARKS = ("absl::InitializeLog", "cuInit", "cudart_stub", "port.cc:", "cpu_feature_guard",
                 "XLA service", "oneDNN", "StreamExecutor", "tensorflow/")


def _tf_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if is_chatter(line) or any(m in line for m in TF_LINE_MARKS)]


def _python(args: list[str], **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("RUNNER_VERBOSE", "TF_CPP_MIN_LOG_LEVEL", "RUNNER_SET_TF_LOG_LEVEL")}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env={**environ, **env}, capture_output=True,
                          text=True, timeout=300, check=False)


def test_chatter_lines_are_recognised_and_others_are_not():
    assert all(is_chatter(line) for line in SEEN)
    kept = ["E0000 00:00:1795468215.494021    1514 cuda_platform.cc:52] failed call to cuInit",
            "run: error: unknown env 'Foo-v0'", "Traceback (most recent call last):",
            "W tensorflow warning without the absl prefix", "WARNING:tensorflow:5 out of the last 5 calls"]
    assert not any(is_chatter(line) for line in kept)


def test_verbose_flag_and_variable(monkeypatch):
    monkeypatch.delenv("RUNNER_VERBOSE", raising=False)
    assert not verbose_requested([]) and verbose_requested(["--alg=ppo2", "--verbose"])
    monkeypatch.setenv("RUNNER_VERBOSE", "0")
    assert not verbose_requested([])
    monkeypatch.setenv("RUNNER_VERBOSE", "1")
    assert verbose_requested([])


def test_help_imports_no_tensorflow():
    out = _python(["-X", "importtime", "-m", "run", "--help"])
    assert out.returncode == 0 and "--verbose" in out.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line]
    assert imported and not [m for m in imported if m.split(".")[0] in ("tensorflow", "numpy", "gymnasium")]


def test_train_save_and_play_print_no_tensorflow_lines_unless_verbose(tmp_path):
    model = str(tmp_path / "m.zip")  # subprocess env workers too
    train = _python(["-m", "run", "--alg=ppo2", "--env=CartPole-v1", "--num_env=2", "--vec_env=subproc",
                     "--num_timesteps=64", "--seed=0",  # seeded: episodes finish, so the plot has data
                     "--nsteps=16", f"--save_path={model}", f"--log_path={tmp_path / 'logs'}"])
    assert train.returncode == 0, train.stderr
    assert _tf_lines(train.stderr) == []
    play = _python(["-m", "run", "--num_timesteps=0", f"--load_path={model}", "--play", "--play_episodes=1",
                    "--no_render", "--eval_episodes=1"])
    assert play.returncode == 0, play.stderr
    assert _tf_lines(play.stderr) == []
    plot = _python(["-m", "plot", str(tmp_path / "logs"), "--out", str(tmp_path / "curves.png")])
    assert plot.returncode == 0 and plot.stderr == "", plot.stderr
    for fmt, out in (("saved_model", "policy"), ("tflite", "policy.tflite")):  # TFLite's XNNPACK line too
        exported = _python(["-m", "export", model, f"--format={fmt}", f"--out={tmp_path / out}"])
        assert exported.returncode == 0 and exported.stderr == "", exported.stderr
    # --verbose shows them: the checks above look at the right lines
    verbose = _python(["-m", "run", "--num_timesteps=0", f"--load_path={model}", "--eval_episodes=1", "--verbose"])
    assert verbose.returncode == 0, verbose.stderr
    assert _tf_lines(verbose.stderr)


@pytest.mark.parametrize("module", ["plot", "tune"])
def test_plot_and_tune_help_are_quiet(module):
    out = _python(["-m", module, "--help"])
    assert out.returncode == 0 and out.stderr == ""


def test_atari_runs_print_no_emulator_banner_unless_verbose(tmp_path):
    pytest.importorskip("ale_py")
    banner = ("A.L.E: Arcade Learning Environment", "[Powered by Stella]")
    base = ["-m", "run", "--alg=ppo2", "--env=PongNoFrameskip-v4", "--num_env=2", "--nsteps=8",
            "--num_timesteps=16", "--seed=0"]
    quiet = _python([*base, "--vec_env=subproc", f"--log_path={tmp_path / 'quiet'}"])  # the workers make the envs
    assert quiet.returncode == 0, quiet.stderr
    assert not [line for line in (quiet.stdout + quiet.stderr).splitlines() if line.startswith(banner)]
    verbose = _python([*base, "--verbose", f"--log_path={tmp_path / 'verbose'}"])
    assert verbose.returncode == 0, verbose.stderr
    assert [line for line in verbose.stderr.splitlines() if line.startswith(banner)]


NAMESPACE_PROBE = """
import sys
from common.process import startup
startup.quiet_tensorflow([])
import tensorflow as tf
print(sorted(m for m in ("tensorflow._api.v2.compat.v1", "tensorflow.lite.python.interpreter") if m in sys.modules))
print("v1" in dir(tf.compat), "Interpreter" in dir(tf.lite))
print(tf.lite.Interpreter.__name__, tf.distribute.experimental.rpc.Client.__name__, tf.compat.v1.Session.__name__)
print(tf.lite.__name__, tf.distribute.__name__, tf.compat.__name__)
print(float(tf.nn.relu(tf.constant(-1.0))), sys.modules["tensorflow.lite"].__name__)
"""
WHOLE = ["True True", "Interpreter Client Session", "tensorflow._api.v2.lite tensorflow._api.v2.distribute tensorflow._api.v2.compat",
         "0.0 tensorflow.lite"]


def test_tensorflow_namespaces_load_on_first_use_and_are_tensorflow_s_own():
    """The runner's import leaves tf.compat and tf.lite unloaded; used, they are the namespaces
    a plain import gives (tf.lite and tf.distribute too, which share a name with packages of tensorflow/)."""
    out = _python(["-c", NAMESPACE_PROBE])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", *WHOLE]
    assert _tf_lines(out.stderr) == []
    eager = _python(["-c", NAMESPACE_PROBE], RUNNER_TF_EAGER_NAMESPACES="1")
    assert eager.returncode == 0, eager.stderr
    assert eager.stdout.splitlines()[0] != "[]" and eager.stdout.splitlines()[1:] == WHOLE


THREADS_PROBE = """
import threading
from common.process import startup
startup.quiet_tensorflow([])
import tensorflow as tf
errors = []
def use():
    try:
        tf.compat.v1.Session
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=use) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(errors)
"""


def test_threads_using_a_deferred_namespace_at_once_all_see_it_whole():
    """Four threads touch tf.compat.v1 together: one loads it, the others wait instead of seeing it half made."""
    out = _python(["-c", THREADS_PROBE])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]"]


LEARN_FROM_PYTHON = """
import gymnasium as gym
from algos.ppo2 import ppo2
from common.vec_env import DummyVecEnv
ppo2.learn(env=DummyVecEnv([lambda: gym.make("CartPole-v1")]), network="mlp", total_timesteps=64, nsteps=16)
"""
MAIN_FROM_PYTHON = """
import run
run.main(["--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=64", "--nsteps=16", "--log_format=csv"])
"""


@pytest.mark.parametrize("code", [LEARN_FROM_PYTHON, MAIN_FROM_PYTHON], ids=["learn", "run.main"])
def test_learn_and_main_called_from_python_start_quietly(code):
    """A script calling ``learn()`` or ``run.main`` prints none of TensorFlow's start-up lines (cuInit's
    included); RUNNER_VERBOSE=1 shows them."""
    quiet = _python(["-c", code])
    assert quiet.returncode == 0, quiet.stderr
    assert _tf_lines(quiet.stderr) == []
    if code is LEARN_FROM_PYTHON:
        verbose = _python(["-c", code], RUNNER_VERBOSE="1")
        assert verbose.returncode == 0, verbose.stderr
        assert _tf_lines(verbose.stderr)

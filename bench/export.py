"""Size and per-call latency of exported policies: `.venv/bin/python bench/export.py [--calls=300]`.

Two ppo2 policies with the runner's default networks, untrained (size and speed do not depend on the
weights' values): CartPole-v1 with the 64x64 mlp, and PongNoFrameskip-v4 (84x84x4 uint8 frames, the
Atari wrappers and a 4-frame stack as the runner builds it) with the Nature cnn. Each is exported to
SavedModel, TFLite and ONNX; the table gives the artifact's size, the median wall time of one call on a
batch of 1 observation through each runtime (SavedModel signature, TFLite signature runner, onnxruntime
session), every runtime held to 1 thread, with ``model.predict`` in this process for comparison, and
whether the artifact's actions on 200 observations from the env equal predict's.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

import export
from algos.ppo2.model import PPO2Model
from common.vec_env import VecFrameStack
from runner.env_factory import make_vec_env

OUT_NAMES = {"saved_model": "policy", "tflite": "policy.tflite", "onnx": "policy.onnx"}


def _env(name: str):
    if name == "CartPole-v1":
        return make_vec_env("CartPole-v1", "classic_control", 1, seed=0)
    return VecFrameStack(make_vec_env("PongNoFrameskip-v4", "atari", 1, seed=0), 4)


def _observations(env, n: int) -> np.ndarray:
    """``n`` observations of a random-action episode (resets included)."""
    obs, out = env.reset(), []
    for _ in range(n):
        out.append(obs[0])
        obs, _, _, _ = env.step(np.array([env.action_space.sample()]))
    return np.stack(out)


def _runner(fmt: str, path: str):
    if fmt == "saved_model":
        fn = tf.saved_model.load(path).signatures["serving_default"]
        return lambda obs: fn(obs=tf.constant(obs))["action"].numpy()
    if fmt == "tflite":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runner = tf.lite.Interpreter(model_path=path, num_threads=1).get_signature_runner()
        return lambda obs: runner(obs=obs)["action"]
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return lambda obs: session.run(["action"], {"obs": obs})[0]


def _median_call_us(fn, obs: np.ndarray, calls: int) -> float:
    for i in range(10):
        fn(obs[i % len(obs)][None])
    times = []
    for i in range(calls):
        x = obs[i % len(obs)][None]
        t = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=300, help="timed calls per runtime")
    args = p.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    print(f"tensorflow {tf.__version__}, batch of 1, median of {args.calls} calls, 1 thread per runtime")
    print(f"{'policy':<22} {'format':<12} {'size (bytes)':>13} {'us/call':>9}  actions == predict")
    for env_id, network in (("CartPole-v1", "mlp"), ("PongNoFrameskip-v4", "cnn")):
        env = _env(env_id)
        model = PPO2Model(env.observation_space, env.action_space, network=network, seed=0)
        obs = _observations(env, 200)
        env.close()
        want = model.predict(obs)[0]
        label = f"{env_id[:4]} {network}"
        print(f"{label:<22} {'predict':<12} {'':>13} {_median_call_us(model.predict, obs, args.calls):>9.0f}")
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "model.zip")
            model.save(path)
            print(f"{label:<22} {'model file':<12} {export.artifact_size(path):>13}")
            for fmt, name in OUT_NAMES.items():
                out = os.path.join(folder, name)
                export.export_model(model, fmt, out)
                run = _runner(fmt, out)
                same = bool(np.array_equal(np.concatenate([run(obs[i:i + 50]) for i in range(0, 200, 50)]), want))
                print(f"{label:<22} {fmt:<12} {export.artifact_size(out):>13} {_median_call_us(run, obs, args.calls):>9.0f}  {same}")


if __name__ == "__main__":
    main()

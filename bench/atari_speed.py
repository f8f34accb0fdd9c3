"""Where an Atari training step goes, and what bfloat16 saves: `.venv/bin/python bench/atari_speed.py`.

    .venv/bin/python bench/atari_speed.py [--threads 2] [--repeats 3] [--pong_steps 20480]

Prints, with the load average before and after:

- frames: microseconds per frame of the ALE step and of ``WarpFrame`` (84x84 gray, numpy path) on real
  PongNoFrameskip-v4 and BreakoutNoFrameskip-v4 frames, now and as it was before 2026-11-26 (a failed
  ``import cv2`` per frame, ``np.mean`` over the 2x1 blocks; the same frames: ``tests/test_atari_wrappers.py``);
- networks: milliseconds per forward + backward pass of a batch of 256 through the Nature CNN (``cnn``, 84x84x4,
  what ppo2's Atari update does per minibatch) and a step of twin 256x256 critics (sac's), float32 against
  bfloat16 compute, in one ``tf.function`` (the median of ``--repeats`` timings of 10 calls);
- with ``--pong_steps N`` (0 skips it): ``python -m run --alg=ppo2 --env=PongNoFrameskip-v4 --num_env=8`` for N
  steps with ``--compute_dtype=float32`` and ``bfloat16``, interleaved ``--repeats`` times, and each run's
  env steps/s from its progress.csv.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _warp_before(frame):
    """WarpFrame's numpy path before 2026-11-26: a failed ``import cv2`` per frame and np.mean over blocks."""
    import numpy as np

    try:
        import cv2  # noqa: F401
    except ImportError:
        pass
    gray = frame.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    rows, cols = np.arange(168) * 210 // 168, np.arange(84) * 160 // 84
    small = gray[rows][:, cols].reshape(84, 2, 84, 1).mean(axis=(1, 3))
    return np.clip(small.round(), 0, 255).astype(np.uint8)[..., None]


def frame_times(game: str, frames: int = 400) -> tuple[float, float, float]:
    """(ALE step, WarpFrame now, WarpFrame before) microseconds per frame of ``game`` (no OpenCV)."""
    import ale_py
    import gymnasium as gym
    import numpy as np

    from common.wrappers import atari_wrappers

    gym.register_envs(ale_py)
    env = gym.make(game)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    shots = []
    t0 = time.perf_counter()
    for _ in range(frames):
        frame, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        shots.append(frame)
        if terminated or truncated:
            env.reset()
    step = time.perf_counter() - t0
    env.close()
    saved_cv2, atari_wrappers.cv2 = atari_wrappers.cv2, None
    try:
        warp = atari_wrappers.WarpFrame(env)
        t0 = time.perf_counter()
        for frame in shots:
            warp.observation(frame)
        now = time.perf_counter() - t0
    finally:
        atari_wrappers.cv2 = saved_cv2
    t0 = time.perf_counter()
    for frame in shots:
        _warp_before(frame)
    before = time.perf_counter() - t0
    return 1e6 * step / frames, 1e6 * now / frames, 1e6 * before / frames


def network_times(threads: int, repeats: int) -> dict[tuple[str, str], float]:
    """Milliseconds per training pass of each (network, dtype)."""
    import numpy as np
    import tensorflow as tf

    from common.nn.models import build_network

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    rng = np.random.default_rng(0)
    cases = {"cnn (84x84x4, batch 256)": ("cnn", (84, 84, 4), {}),
             "twin mlp 256x256 (batch 256)": ("mlp", (18,), {"num_layers": 2, "num_hidden": 256,
                                                             "activation": "relu"})}
    out = {}
    for label, (name, shape, kwargs) in cases.items():
        x = tf.constant(rng.uniform(0, 1, (256,) + shape).astype(np.float32))
        for dtype in ("float32", "bfloat16"):
            twins = 2 if name == "mlp" else 1
            if name == "mlp":  # the mlp has no compute_dtype: cast around it as the image networks do inside
                nets = [build_network(name, shape, seed=i, **kwargs) for i in range(twins)]
                cast = tf.bfloat16 if dtype == "bfloat16" else tf.float32

                def forward(net: tf.Module, x: tf.Tensor, cast: tf.DType = cast) -> tf.Tensor:
                    h = tf.cast(x, cast)
                    for layer in net.layers:
                        h = tf.nn.relu(layer(h))
                    return tf.cast(h, tf.float32)
            else:
                nets = [build_network(name, shape, seed=0, compute_dtype=dtype, **kwargs)]

                def forward(net: tf.Module, x: tf.Tensor) -> tf.Tensor:
                    return net(x)
            variables = [v for net in nets for v in net.trainable_variables]

            @tf.function
            def step(nets: list[tf.Module] = nets, variables: list[tf.Variable] = variables,
                     forward: Callable[[tf.Module, tf.Tensor], tf.Tensor] = forward,
                     x: tf.Tensor = x) -> list[tf.Tensor]:
                with tf.GradientTape() as tape:
                    loss = sum(tf.reduce_mean(tf.square(forward(net, x))) for net in nets)
                return tape.gradient(loss, variables)

            step()
            timings = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for _ in range(10):
                    step()
                timings.append((time.perf_counter() - t0) / 10 * 1e3)
            out[(label, dtype)] = statistics.median(timings)
    return out


def pong_fps(steps: int, dtype: str) -> float:
    """Env steps/s of one ppo2 Pong run (8 envs) with ``--compute_dtype=dtype``, from its progress.csv."""
    with tempfile.TemporaryDirectory() as log:
        subprocess.run([sys.executable, "-m", "run", "--alg=ppo2", "--env=PongNoFrameskip-v4", "--num_env=8",
                        f"--num_timesteps={steps}", f"--compute_dtype={dtype}", f"--log_path={log}/log",
                        "--log_format=csv", "--no_progress", "--seed=0"],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(log, "log", "progress.csv"), encoding="utf-8") as f:
            last = list(csv.DictReader(f))[-1]
    return float(last["time/total_timesteps"]) / float(last["time/time_elapsed"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2, help="TensorFlow intra-op threads for the network timings")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--pong_steps", type=int, default=0, help="steps of each end-to-end Pong run (0: none)")
    args = p.parse_args()
    from common.process import startup

    startup.quiet_tensorflow([])
    print(f"load average before: {load()}")
    print("\n| game (us per frame) | ALE step | WarpFrame now | WarpFrame before | before / now |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for game in ("PongNoFrameskip-v4", "BreakoutNoFrameskip-v4"):
        step, now, before = frame_times(game)
        print(f"| {game} | {step:.0f} | {now:.0f} | {before:.0f} | {before / now:.2f}x |")
    times = network_times(args.threads, args.repeats)
    print(f"\n| network, {args.threads} threads | float32 (ms) | bfloat16 (ms) | float32 / bfloat16 |")
    print("| --- | ---: | ---: | ---: |")
    for label in dict.fromkeys(label for label, _ in times):
        f32, bf16 = times[(label, "float32")], times[(label, "bfloat16")]
        print(f"| {label} | {f32:.2f} | {bf16:.2f} | {f32 / bf16:.2f}x |")
    if args.pong_steps:
        fps: dict[str, list[float]] = {"float32": [], "bfloat16": []}
        for _ in range(args.repeats):
            for dtype, values in fps.items():
                values.append(pong_fps(args.pong_steps, dtype))
        print(f"\nppo2 PongNoFrameskip-v4, 8 envs, {args.pong_steps} steps, env steps/s per run (interleaved):")
        for dtype, values in fps.items():
            print(f"  {dtype}: {', '.join(f'{v:.0f}' for v in values)} (median {statistics.median(values):.0f})")
        print(f"  bfloat16 / float32: {statistics.median(fps['bfloat16']) / statistics.median(fps['float32']):.2f}x")
    print(f"\nload average after: {load()}")


if __name__ == "__main__":
    main()

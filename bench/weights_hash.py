"""Weights fingerprint of a short seeded run: `.venv/bin/python bench/weights_hash.py ALG [ALG ...]` (or `all`).

Prints the sha256 (first 16 hex digits) of every weight array after a short run with the algorithm's shipped
entry for a small env, seed 3: run it before and after a refactoring to show the numbers did not move.
"""
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from common.process import startup

startup.quiet_tensorflow()  # TensorFlow imported the way run.py imports it
import importlib

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers BitFlipping)
from algos.hyperparameters import shipped_entry
from common.vec_env import DummyVecEnv
from common.wrappers.monitor import Monitor

# alg: (env id, envs, env steps, extra settings, None dropping the entry's value); ppo2 keeps jit_compile=True, the XLA update its earlier
# fingerprint was taken with ("auto" skips XLA on a 20k-step run)
CASES = {
    "ppo2": ("CartPole-v1", 8, 20000, {"network": "mlp", "log_interval": 10**9, "jit_compile": True}),
    "a2c": ("CartPole-v1", 8, 20000, {"log_interval": 10**9}),
    "trpo": ("CartPole-v1", 1, 10000, {"log_interval": 10**9}),
    "deepq": ("CartPole-v1", 1, 8000, {"network": "mlp", "print_freq": None}),
    "ddpg": ("Pendulum-v1", 1, 3000, {"log_interval": 10**9, "learning_starts": 1000}),
    "sac": ("Pendulum-v1", 1, 3000, {"log_interval": 10**9, "learning_starts": 1000}),
    "td3": ("Pendulum-v1", 1, 3000, {"log_interval": 10**9, "learning_starts": 1000}),
    "tqc": ("Pendulum-v1", 1, 3000, {"log_interval": 10**9, "learning_starts": 1000}),
    "qrdqn": ("CartPole-v1", 1, 8000, {"print_freq": None}),
    "rainbow": ("CartPole-v1", 1, 8000, {"print_freq": None}),
    "her": ("BitFlipping-v0", 1, 2000, {"log_interval": 10**9, "learning_starts": 500}),
}
ENV_TYPES = {"CartPole-v1": "classic_control", "Pendulum-v1": "classic_control", "BitFlipping-v0": "envs"}


def fingerprint(alg: str) -> tuple[str, int]:
    """The fingerprint of ``alg``'s weights after its short run, and how many arrays it covers."""
    env_id, n, steps, extra = CASES[alg]
    kw = {k: v for k, v in {**shipped_entry(alg, ENV_TYPES[env_id], env_id), **extra}.items() if v is not None}  # None: the setting's default
    learn = importlib.import_module(f"algos.{alg}.{alg}").learn
    env = DummyVecEnv([lambda: Monitor(gym.make(env_id)) for _ in range(n)])
    model = learn(env=env, total_timesteps=steps, seed=3, **kw)
    arrays = model.get_arrays()
    keys = sorted(k for k in arrays if "adam" not in k)
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(arrays[k]).tobytes() for k in keys)).hexdigest()[:16]
    return digest, len(keys)


if __name__ == "__main__":
    for name in (sorted(CASES) if sys.argv[1:] == ["all"] else sys.argv[1:]):
        print("HASH", name, *fingerprint(name), flush=True)

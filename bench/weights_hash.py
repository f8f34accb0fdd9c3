"""Weights fingerprint of a short seeded run: `.venv/bin/python bench/weights_hash.py {ppo2,deepq,ddpg}`.

Prints the sha256 (first 16 hex digits) of every weight array after a short run with the algorithm's
classic_control defaults, seed 3: run it before and after a refactoring to show the numbers did not move.
"""
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from common.process import startup

startup.quiet_tensorflow()  # TensorFlow imported the way run.py imports it
import gymnasium as gym
import numpy as np

from algos.hyperparameters import shipped_entry
from common.vec_env import DummyVecEnv
from common.wrappers.monitor import Monitor

alg = sys.argv[1]
if alg == "ppo2":
    from algos.ppo2 import ppo2 as m
    # jit_compile=True: the XLA update, as before "auto" (a 20k-step run is too short for XLA to pay)
    kw = {**shipped_entry("ppo2", env_id="CartPole-v1"), "network": "mlp", "log_interval": 10**9, "jit_compile": True}
    env_id, n, steps = "CartPole-v1", 8, 20000
elif alg == "deepq":
    from algos.deepq import deepq as m
    env_id, n, steps, kw = "CartPole-v1", 1, 8000, {**shipped_entry("deepq", "classic_control"), "network": "mlp"}
    kw.pop("print_freq", None)
else:
    from algos.ddpg import ddpg as m
    env_id, n, steps, kw = "Pendulum-v1", 1, 3000, {**shipped_entry("ddpg", "classic_control"), "log_interval": 10**9}
    kw["learning_starts"] = 1000
env = DummyVecEnv([lambda: Monitor(gym.make(env_id)) for _ in range(n)])
model = m.learn(env=env, total_timesteps=steps, seed=3, **kw)
arrs = model.get_arrays()
keys = sorted(k for k in arrs if "adam" not in k)
h = hashlib.sha256(b"".join(np.ascontiguousarray(arrs[k]).tobytes() for k in keys)).hexdigest()[:16]
print("HASH", alg, h, len(keys))

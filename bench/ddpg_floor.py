"""The arithmetic floor of an off-policy run (ddpg, sac, td3, tqc): the time of its fused gradient steps alone
(no env, no acting), and the same with XLA on and off.

    .venv/bin/python bench/ddpg_floor.py [--algs ddpg sac td3] [--updates 2000] [--compute_dtype bfloat16]

prints, per algorithm on Pendulum-v1 with its shipped entry, ms per gradient step without and with
``jit_compile`` (blocks of the entry's gradient steps per call, at least 100); ``--compute_dtype`` sets the
mlp networks' (``--compute_dtype=bfloat16`` of the runner).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from gymnasium import spaces

from algos.base import constructor_settings

MODELS = {"ddpg": "algos.ddpg.model:DDPGModel", "sac": "algos.sac.model:SACModel", "td3": "algos.td3.model:TD3Model",
          "tqc": "algos.tqc.model:TQCModel"}
BLOCK_NAMES = {"ddpg": ("nb_rollout_steps", "nb_train_steps")}  # others: train_freq, gradient_steps
NET_KEYS = {"num_layers", "num_hidden", "activation", "layer_norm"}


def model_class(alg: str) -> type:
    module, name = MODELS[alg].split(":")
    return getattr(importlib.import_module(module), name)


def random_batch(rng: np.random.Generator, steps: int, batch_size: int, obs_dim: int,
                 act_dim: int) -> dict[str, np.ndarray]:
    """A training block of ``steps`` random batches (arrays of shape ``(steps, batch_size, ...)``), as
    ``model.train`` takes them: standard normal observations and rewards, actions uniform in [-1, 1], no dones."""
    return {"obs": rng.standard_normal((steps, batch_size, obs_dim), np.float32),
            "actions": rng.uniform(-1, 1, (steps, batch_size, act_dim)).astype(np.float32),
            "rewards": rng.standard_normal((steps, batch_size), np.float32),
            "next_obs": rng.standard_normal((steps, batch_size, obs_dim), np.float32),
            "dones": np.zeros((steps, batch_size), np.float32)}


def time_fused_updates(observation_space: spaces.Box, action_space: spaces.Box, n_updates: int,
                       batch_size: int = 256, nb_train_steps: int = 100, seed: int = 0, alg: str = "ddpg",
                       first_calls: list[float] | None = None, **model_kwargs) -> float:
    """Seconds that ``n_updates`` gradient steps take in blocks of ``nb_train_steps`` per TF call, on
    random batches already in memory (tracing excluded; the first call's seconds, tracing and compiling, are
    appended to ``first_calls``). ``model_kwargs`` go to the ``alg``'s model."""
    model = model_class(alg)(observation_space, action_space, seed=seed, **model_kwargs)
    data = random_batch(np.random.default_rng(seed), nb_train_steps, batch_size, model.obs_dim, model.act_dim)
    t = time.perf_counter()
    model.train(data)  # trace (and compile) once, on the shape measured
    if first_calls is not None:
        first_calls.append(time.perf_counter() - t)
    calls = max(1, n_updates // nb_train_steps)
    t = time.perf_counter()
    for _ in range(calls):
        model.train(data)
    return (time.perf_counter() - t) * n_updates / (calls * nb_train_steps)


def block_sizes(alg: str, kwargs: dict) -> tuple[int, int]:
    """(env steps per env, gradient steps) of one training block in an entry's settings."""
    from algos.hyperparameters import table

    rollout, train = BLOCK_NAMES.get(alg, ("train_freq", "gradient_steps"))
    values = {**table(alg).defaults, **kwargs}
    return int(values[rollout]), int(values[train])


def planned_updates(total_timesteps: int, num_envs: int, nb_rollout_steps: int = 100, nb_train_steps: int = 50,
                    learning_starts: int = 0, batch_size: int = 64) -> int:
    """Gradient steps that ``learn`` makes in a run (it trains after each block once enough data is in)."""
    steps = updates = 0
    while steps < total_timesteps:
        steps = min(steps + nb_rollout_steps * num_envs, total_timesteps + num_envs - 1)
        if steps >= max(learning_starts, batch_size):
            updates += nb_train_steps
    return updates


def model_settings(alg: str, kwargs: dict) -> dict:
    """The model constructor's arguments in an entry's settings (network parameters as network_kwargs)."""
    from algos.hyperparameters import table

    settings = constructor_settings(model_class(alg), {**table(alg).defaults, **kwargs})
    settings["network_kwargs"] = {k: v for k, v in kwargs.items() if k in NET_KEYS}
    return settings


def floor_report(rows: list[dict], env_id: str, kwargs: dict, total_timesteps: int, num_envs: int = 1,
                 measure_updates: int = 2000, alg: str = "ddpg") -> str:
    """One line for bench/train.py: the time of the run's gradient steps alone vs the whole run."""
    import gymnasium as gym

    from algos.hyperparameters import table

    env = gym.make(env_id)
    rollout, train = block_sizes(alg, kwargs)
    values = {**table(alg).defaults, **kwargs}
    n = planned_updates(total_timesteps, num_envs, rollout, train, values["learning_starts"], values["batch_size"])
    per = time_fused_updates(env.observation_space, env.action_space, measure_updates, values["batch_size"],
                             train, alg=alg, **model_settings(alg, kwargs)) / measure_updates
    floor = per * n
    run = float(np.median([r["seconds"] for r in rows]))
    return (f"floor: {n} fused updates alone {floor:.1f}s ({per * 1e3:.2f} ms each, blocks of {train}, measured "
            f"over {measure_updates}); median whole run {run:.1f}s = {run / floor:.2f} x floor")


def main(argv: list[str] | None = None) -> int:
    import gymnasium as gym

    from algos.hyperparameters import shipped_entry, table

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algs", nargs="+", default=["ddpg", "sac", "td3"], choices=sorted(MODELS))
    p.add_argument("--env", default="Pendulum-v1")
    p.add_argument("--env-type", default="classic_control")
    p.add_argument("--updates", type=int, default=2000)
    p.add_argument("--compute_dtype", default="float32", choices=["float32", "bfloat16", "auto"])
    args = p.parse_args(argv)
    env = gym.make(args.env)
    for alg in args.algs:
        kwargs = shipped_entry(alg, args.env_type, args.env)
        _, train = block_sizes(alg, kwargs)
        settings = model_settings(alg, kwargs)
        if args.compute_dtype != "float32":
            settings["network_kwargs"]["compute_dtype"] = args.compute_dtype
        block = max(train, 100)
        batch = {**table(alg).defaults, **kwargs}["batch_size"]
        times, first = {}, []
        for jit in (False, True):
            times[jit] = time_fused_updates(env.observation_space, env.action_space, args.updates, batch, block,
                                            alg=alg, first_calls=first, **{**settings, "jit_compile": jit}) / args.updates
        single = time_fused_updates(env.observation_space, env.action_space, min(args.updates, 500), batch, 1,
                                    alg=alg, **settings) / min(args.updates, 500)
        print(f"{alg} {args.env}: {times[False] * 1e3:.2f} ms per gradient step in blocks of {block}, "
              f"XLA {times[True] * 1e3:.2f} ms ({times[False] / times[True]:.2f}x); one step per call "
              f"{single * 1e3:.2f} ms (batch {batch}, network {settings['network_kwargs'] or 'default'}); first call "
              f"(tracing, compiling) {first[0]:.2f} s, XLA {first[1]:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

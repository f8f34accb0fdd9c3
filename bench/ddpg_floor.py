"""The arithmetic floor of a ddpg run: the time of its fused gradient steps alone (no env, no acting)."""
from __future__ import annotations

import time

import numpy as np
from gymnasium import spaces

from algos.ddpg.model import DDPGModel


def time_fused_updates(observation_space: spaces.Box, action_space: spaces.Box, n_updates: int,
                       batch_size: int = 256, nb_train_steps: int = 100, seed: int = 0,
                       **model_kwargs) -> float:
    """Seconds that ``n_updates`` gradient steps take in blocks of ``nb_train_steps`` per TF call, on
    random batches already in memory (tracing excluded). ``model_kwargs`` go to ``DDPGModel``."""
    model = DDPGModel(observation_space, action_space, seed=seed, **model_kwargs)
    rng = np.random.default_rng(seed)
    od, ad = model.obs_dim, model.act_dim

    def batch(k: int) -> dict[str, np.ndarray]:
        return {"obs": rng.standard_normal((k, batch_size, od), np.float32),
                "actions": rng.uniform(-1, 1, (k, batch_size, ad)).astype(np.float32),
                "rewards": rng.standard_normal((k, batch_size), np.float32),
                "next_obs": rng.standard_normal((k, batch_size, od), np.float32),
                "dones": np.zeros((k, batch_size), np.float32)}

    model.train(batch(2))  # trace once
    data = batch(nb_train_steps)
    calls = max(1, n_updates // nb_train_steps)
    t = time.perf_counter()
    for _ in range(calls):
        model.train(data)
    return (time.perf_counter() - t) * n_updates / (calls * nb_train_steps)


def planned_updates(total_timesteps: int, num_envs: int, nb_rollout_steps: int = 100, nb_train_steps: int = 50,
                    learning_starts: int = 0, batch_size: int = 64) -> int:
    """Gradient steps that ``learn`` makes in a run (it trains after each block once enough data is in)."""
    steps = updates = 0
    while steps < total_timesteps:
        steps = min(steps + nb_rollout_steps * num_envs, total_timesteps + num_envs - 1)
        if steps >= max(learning_starts, batch_size):
            updates += nb_train_steps
    return updates


def floor_report(rows: list[dict], env_id: str, kwargs: dict, total_timesteps: int, num_envs: int = 1,
                 measure_updates: int = 2000) -> str:
    """One line for bench/train.py: the time of the run's gradient steps alone vs the whole run."""
    import gymnasium as gym

    env = gym.make(env_id)
    keys = ("gamma", "tau", "actor_lr", "critic_lr", "critic_l2_reg", "clip_norm", "reward_scale",
            "normalize_observations", "normalize_returns", "popart")
    model_kwargs = {k: kwargs[k] for k in keys if k in kwargs}
    net_keys = {"num_layers", "num_hidden", "activation", "layer_norm"}
    model_kwargs["network_kwargs"] = {k: v for k, v in kwargs.items() if k in net_keys}
    sched = {k: kwargs[k] for k in ("nb_rollout_steps", "nb_train_steps", "learning_starts", "batch_size") if k in kwargs}
    n = planned_updates(total_timesteps, num_envs, **sched)
    per = time_fused_updates(env.observation_space, env.action_space, measure_updates,
                             kwargs.get("batch_size", 64), kwargs.get("nb_train_steps", 50), **model_kwargs) / measure_updates
    floor = per * n
    run = float(np.median([r["seconds"] for r in rows]))
    return (f"floor: {n} fused updates alone {floor:.1f}s ({per * 1e3:.2f} ms each, measured over {measure_updates}); "
            f"median whole run {run:.1f}s = {run / floor:.2f} x floor")

"""Evaluate saved checkpoints of one side of bench/time_to_score.py, in that side's own venv.

    PYTHON bench/tts_evaluate.py JOB_JSON

The job names the side (``ours``, ``sb3``, ``cleanrl``), the env, the checkpoint files and the eval seeds.
Every checkpoint plays one deterministic episode per seed, episode i starting from ``reset(seed=seeds[i])``,
with the side's own observation normalisation (ours: the model file's VecNormalize statistics through the
runner's evaluation; SB3: the VecNormalize statistics saved beside the checkpoint; CleanRL's scripts used here
normalise nothing) and Box actions clipped into the action space. Prints one line per checkpoint:
``TTS_EVAL <json>`` with the file and the mean return. Imports only numpy and gymnasium at the top, so that
it runs in the peers' venvs.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

Act = Callable[[np.ndarray], np.ndarray]  # a batch of one observation -> a batch of one action


def episodes(env: gym.Env, act: Act, seeds: Sequence[int]) -> list[float]:
    """The undiscounted return of one deterministic episode per seed, Box actions clipped into the space."""
    box = isinstance(env.action_space, gym.spaces.Box)
    returns = []
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        total, done = 0.0, False
        while not done:
            action = act(np.asarray(obs)[None])[0]
            if box:
                action = np.clip(action, env.action_space.low, env.action_space.high)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return returns


def evaluate_ours(env_id: str, path: str, seeds: Sequence[int]) -> list[float]:
    """Our model file through the runner's own evaluation: one env made as the runner makes it, per seed."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from algos.base import load_model
    from common.vec_env import VecNormalize
    from run_util import get_env_type
    from runner.env_factory import make_vec_env
    from runner.evaluation import evaluate

    model = load_model(path)
    env_type, make_id = get_env_type(env_id)
    returns = []
    for seed in seeds:
        env = make_vec_env(make_id, env_type, 1, seed=int(seed), logger_dir="", vec_env_kind="dummy")
        if getattr(model, "vec_normalize_state", None) is not None:
            env = VecNormalize(env)
        returns.extend(evaluate(model, env, 1).returns)
        env.close()
    return returns


def sb3_policy(algo: str, path: str, env: gym.Env) -> Act:
    """A stable-baselines3 checkpoint's deterministic action, through its saved VecNormalize statistics."""
    import pickle

    import sb3_contrib
    import stable_baselines3

    model = getattr(stable_baselines3, algo.upper(), None) or getattr(sb3_contrib, algo.upper())
    model = model.load(path, device="cpu")
    stats = path[: -len(".zip")] + ".vecnormalize.pkl"
    normalize = lambda obs: obs
    if os.path.exists(stats):
        with open(stats, "rb") as f:
            vec_normalize = pickle.load(f)
        normalize = vec_normalize.normalize_obs
    return lambda obs: model.predict(normalize(obs), deterministic=True)[0]


def cleanrl_policy(script: str, kind: str, path: str, env: gym.Env) -> Act:
    """A CleanRL script's network (its own class, imported from the script) acting deterministically."""
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("cleanrl_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(env.spec.id)])  # the spaces the script's networks read
    net = getattr(module, {"agent": "Agent", "q": "QNetwork", "actor": "Actor"}[kind])(envs)
    net.load_state_dict(torch.load(path, map_location="cpu"))
    forward = {"agent": lambda x: net.actor(x).argmax(dim=1), "q": lambda x: net(x).argmax(dim=1),
               "actor": (lambda x: net.get_action(x)[2]) if hasattr(net, "get_action") else net}[kind]

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return forward(torch.as_tensor(obs, dtype=torch.float32)).numpy()

    return act


def main(job: dict[str, Any]) -> None:
    for path in job["checkpoints"]:
        if job["side"] == "ours":
            returns = evaluate_ours(job["env"], path, job["seeds"])
        else:
            env = gym.make(job["env"])
            act = (sb3_policy(job["algo"], path, env) if job["side"] == "sb3"
                   else cleanrl_policy(job["script"], job["kind"], path, env))
            returns = episodes(env, act, job["seeds"])
            env.close()
        print("TTS_EVAL " + json.dumps({"path": path, "mean": float(np.mean(returns))}), flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))

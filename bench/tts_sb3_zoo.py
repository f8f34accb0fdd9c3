"""Train stable-baselines3 with an rl-baselines3-zoo entry as the zoo's train.py would, saving checkpoints.

    /work/peers-venv/bin/python bench/tts_sb3_zoo.py JOB_JSON    (a venv from bench/requirements-peers.txt)

The job gives the algorithm (``ppo``, ``dqn``, ``ddpg``, ``td3``, ``sac``), the env, the zoo's entry (a table of
bench/zoo_hyperparams.toml), the seed, the budget, the checkpoint folder and the env steps between checkpoints.
As the zoo's train.py: ``make_vec_env`` (DummyVecEnv, Monitor) with the entry's ``n_envs`` and the seed,
VecNormalize with the entry's gamma when ``normalize``, action noise from ``noise_type``/``noise_std``,
``lin_<x>`` schedules, ``policy_kwargs``, CPU. Left out: the zoo's periodic evaluation callback (evaluation
is not timed here: every checkpoint is evaluated afterwards by bench/tts_evaluate.py). Every ``every`` env
steps, and at the end, ``model.save`` writes ``<folder>/<steps>.zip`` (and the VecNormalize statistics beside
it with its own ``save``), inside the timed run.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np
import stable_baselines3
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.noise import (
    NormalActionNoise,
    OrnsteinUhlenbeckActionNoise,
)
from stable_baselines3.common.vec_env import VecNormalize

ACTIVATIONS = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "elu": torch.nn.ELU}
ZOO_KEYS = ("n_timesteps", "n_envs", "normalize", "noise_type", "noise_std", "policy")


def schedule(value: Any) -> Any:
    """The zoo's ``lin_<x>``: x times the remaining progress; other values as they are."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda progress: progress * start
    return value


class Checkpoints(BaseCallback):
    """``model.save`` every ``every`` env steps into ``folder`` (and the VecNormalize statistics beside it)."""

    def __init__(self, folder: str, every: int) -> None:
        super().__init__()
        self.folder, self.every, self.next, self.saved = folder, every, every, -1

    def save(self) -> None:
        if self.saved == self.num_timesteps:
            return
        self.saved = self.num_timesteps
        path = os.path.join(self.folder, f"{self.num_timesteps:010d}")
        self.model.save(path + ".zip")
        normalize = self.model.get_vec_normalize_env()
        if normalize is not None:
            normalize.save(path + ".vecnormalize.pkl")

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next:
            self.save()
            while self.next <= self.num_timesteps:
                self.next += self.every
        return True


def build(job: dict[str, Any]) -> Any:
    """The model the zoo's train.py builds from the entry."""
    entry, seed = job["entry"], job["seed"]
    env = make_vec_env(job["env"], n_envs=entry.get("n_envs", 1), seed=seed)
    if entry.get("normalize"):
        env = VecNormalize(env, **({"gamma": entry["gamma"]} if "gamma" in entry else {}))
    kwargs = {k: schedule(v) for k, v in entry.items() if k not in ZOO_KEYS}
    if "policy_kwargs" in kwargs:
        policy_kwargs = dict(kwargs["policy_kwargs"])
        if "activation_fn" in policy_kwargs:
            policy_kwargs["activation_fn"] = ACTIVATIONS[policy_kwargs["activation_fn"]]
        kwargs["policy_kwargs"] = policy_kwargs
    if entry.get("noise_type"):
        n, std = env.action_space.shape[0], entry["noise_std"]
        noise = NormalActionNoise if "normal" in entry["noise_type"] else OrnsteinUhlenbeckActionNoise
        kwargs["action_noise"] = noise(mean=np.zeros(n), sigma=std * np.ones(n))
    algo = getattr(stable_baselines3, job["algo"].upper())
    return algo(entry.get("policy", "MlpPolicy"), env, seed=seed, device="cpu", **kwargs)


def main(job: dict[str, Any]) -> None:
    os.makedirs(job["folder"], exist_ok=True)
    if job.get("threads"):
        torch.set_num_threads(job["threads"])
    model = build(job)
    checkpoints = Checkpoints(job["folder"], job["every"])
    model.learn(total_timesteps=job["timesteps"], callback=checkpoints)
    checkpoints.save()
    print(f"TTS_VERSIONS stable-baselines3 {stable_baselines3.__version__}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads)", flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))

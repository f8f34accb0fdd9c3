"""A tiny algorithm for the runner's tests, used as ``--alg=tests.fake_alg:learn`` (no TensorFlow).

``learn`` steps the env with seeded random actions, logs like a real algorithm and returns a
``FakeModel`` that remembers what it was called with. The model acts with a fixed rule (action 0,
or the middle of a Box) when deterministic and randomly otherwise; with ``recurrent=True`` its state
counts the steps since each env's episode start, so tests can check that the state is carried and reset.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import numpy as np

from algos import training
from common.files.model_file import load_model_file, save_model_file
from common.files.space_json import check_spaces, space_from_json, space_to_json
from common.logs import logger

CALLS: list[dict[str, Any]] = []  # every learn() call's arguments, for the tests


def defaults(env_type: str) -> dict[str, Any]:
    """Per-env-type defaults (the external-algorithm form of algos/<alg>/defaults.py)."""
    return {"lr": 0.5} if env_type == "envs" else {}


class FakeModel:
    """Acting interface of a model, without learning anything."""

    def __init__(self, observation_space: Any, action_space: Any, config: dict[str, Any],
                 recurrent: bool = False, seed: int | None = None) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.config = config
        self.recurrent = recurrent
        self.rng = np.random.default_rng(seed)
        self.states_seen: list[np.ndarray] = []

    def initial_state(self, batch_size: int) -> np.ndarray | None:
        return np.zeros(batch_size, dtype=np.int64) if self.recurrent else None

    def predict(self, obs: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray, Any]:
        n = len(next(iter(obs.values()))) if isinstance(obs, dict) else len(obs)
        if deterministic:
            space = self.action_space
            one = (space.low + space.high) / 2 if hasattr(space, "low") else np.zeros_like(space.sample())
            actions = np.stack([np.asarray(one)] * n)
        else:
            actions = np.stack([self._sample() for _ in range(n)])
        if self.recurrent:
            state = np.where(np.asarray(episode_start, dtype=bool), 0, state) + 1
            self.states_seen.append(state.copy())
        return actions, state

    def _sample(self) -> Any:
        space = self.action_space
        if hasattr(space, "n"):
            return self.rng.integers(space.n)
        return self.rng.uniform(space.low, space.high).astype(space.dtype)

    def save(self, path: str) -> None:
        meta = {"algorithm": "fake_alg", "config": self.config, "recurrent": self.recurrent,
                "observation_space": space_to_json(self.observation_space),
                "action_space": space_to_json(self.action_space), "vec_normalize": None}
        save_model_file(path, meta, {"dummy": np.arange(3.0)})


def load(path: str, env: Any = None) -> FakeModel:
    """Load a FakeModel; raises ModelFileError when ``env``'s spaces differ from the model's."""
    meta, _ = load_model_file(path)
    if env is not None:
        check_spaces(meta, env)
    return FakeModel(space_from_json(meta["observation_space"]), space_from_json(meta["action_space"]),
                     meta["config"], recurrent=meta["recurrent"])


def learn(*, env: Any, network: str | None = None, total_timesteps: int, seed: int | None = None,
          lr: float = 1e-3, nsteps: int = 16, use_bias: bool = True, activation: str = "tanh",
          layers: list | None = None, recurrent: bool = False, load_path: str | None = None,
          interrupt_at: int | None = None, signal_at: int | None = None, signal_name: str = "SIGTERM") -> FakeModel:
    """Step ``env`` with random actions for ``total_timesteps`` and return a FakeModel.

    Args:
        env: the vec env.
        network: recorded only.
        total_timesteps: env steps (summed over envs).
        seed: seeds the action sampling.
        lr: recorded only (a float hyperparameter for the type checks).
        nsteps: steps per env between log dumps (an int hyperparameter).
        use_bias: recorded only (a bool hyperparameter).
        activation: recorded only (a str hyperparameter).
        layers: recorded only (a list hyperparameter).
        recurrent: make a model with recurrent state.
        load_path: recorded only (continue-training form).
        interrupt_at: raise KeyboardInterrupt after this many timesteps (tests Ctrl-C handling).
        signal_at: send this process ``signal_name`` after this many timesteps (tests SIGTERM/SIGHUP).
    """
    config = {"network": network, "total_timesteps": total_timesteps, "seed": seed, "lr": lr, "nsteps": nsteps,
                  "use_bias": use_bias, "activation": activation, "layers": layers, "load_path": load_path}
    CALLS.append(dict(config, num_envs=env.num_envs))
    model = FakeModel(env.observation_space, env.action_space, config, recurrent=recurrent, seed=seed)
    training.register_model(model)
    env.reset()
    done_steps, returns = 0, []
    while done_steps < total_timesteps:
        for _ in range(nsteps):
            actions = np.stack([model._sample() for _ in range(env.num_envs)])
            _, _, _, infos = env.step(actions)
            returns += [info["episode"]["r"] for info in infos if "episode" in info]
            done_steps += env.num_envs
            if interrupt_at is not None and done_steps >= interrupt_at:
                raise KeyboardInterrupt
            if signal_at is not None and done_steps >= signal_at:
                os.kill(os.getpid(), getattr(signal, signal_name))
                time.sleep(5)  # the handler raises during the sleep
        logger.logkv("time/total_timesteps", done_steps)
        logger.logkv("rollout/ep_rew_mean", float(np.mean(returns[-100:])) if returns else float("nan"))
        logger.dumpkvs()
    return model

"""Algorithms that are deepq with other defaults (qrdqn, rainbow): their model class and ``learn``."""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

from algos import hyperparameters
from algos.deepq.deepq import DQNStep, train
from algos.deepq.model import DQNModel

if TYPE_CHECKING:
    from common.vec_env.base import VecEnv


def variant_model(algorithm: str) -> type[DQNModel]:
    """A ``DQNModel`` subclass named ``algorithm`` whose constructor defaults are the settings in which
    ``hyperparams/<algorithm>.toml``'s [defaults] differ from deepq's (model files name ``algorithm``)."""
    own, base = hyperparameters.table(algorithm).defaults, hyperparameters.table("deepq").defaults
    signature = inspect.signature(DQNModel.__init__)
    changed = {name: own[name] for name, p in signature.parameters.items()
               if p.kind is p.KEYWORD_ONLY and name in own and own[name] != base.get(name)}

    def __init__(self, observation_space, action_space, **kwargs):
        DQNModel.__init__(self, observation_space, action_space, **{**changed, **kwargs})

    __init__.__signature__ = signature.replace(parameters=[  # type: ignore[attr-defined]
        p.replace(default=changed[name]) if name in changed else p for name, p in signature.parameters.items()])
    doc = f"deepq's model with {algorithm}'s defaults ({', '.join(f'{k}={v!r}' for k, v in changed.items())})."
    return type(f"{algorithm.upper()}Model", (DQNModel,), {"algorithm": algorithm, "__init__": __init__,
                                                           "__doc__": doc, "__module__": f"algos.{algorithm}.model"})


def variant_learn(algorithm: str, model_class: type[DQNModel]) -> Callable[..., DQNModel]:
    """``learn`` of ``algorithm``: deepq's loop with its table and model class."""

    def learn(*, env: VecEnv, network: str | Callable | None = None, total_timesteps: int, seed: int | None = None,
              load_path: str | None = None, callback: Callable[[DQNStep], bool] | None = None,
              **kwargs) -> DQNModel:
        return train(algorithm, model_class, env=env, network=network, total_timesteps=total_timesteps, seed=seed,
                     load_path=load_path, callback=callback, **kwargs)

    learn.__doc__ = (f"Train {algorithm} (deepq with the defaults of hyperparams/{algorithm}.toml) on a VecEnv with "
                     "a Discrete action space; arguments as ``algos.deepq.deepq.learn``.")
    learn.__module__ = f"algos.{algorithm}.{algorithm}"
    return learn

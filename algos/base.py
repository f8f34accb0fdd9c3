"""The model contract every algorithm implements, one way to save it, and ``load_model`` for any file.

A model offers ``predict(obs, state, episode_start, deterministic) -> (actions, state)`` (one observation
or a batch), ``initial_state(batch_size)``, ``get_arrays()``/``set_arrays(arrays)``, ``save(path)`` and, for
``python -m export``, ``policy_graph()``. Subclasses of ``Model`` write only ``predict_batch``, the arrays,
``policy_graph``, and what their file needs beyond the shared metadata.
``algos.<alg>.<alg>.load`` is ``loader(ModelClass)``; ``load_model`` finds the algorithm from the file.

Every algorithm's ``algos.<alg>.<alg>.learn(*, env, network=None, total_timesteps, seed=None, load_path=None,
**kwargs)`` takes: ``env``, the VecEnv to learn from (any number of envs); ``network``, a registered network
name or builder (None: the algorithm's default, "cnn" for images where it has one, else "mlp");
``total_timesteps``, env steps in total over all envs and, under MPI, all ranks; ``seed``, which seeds the
weights, every sampling generator, TensorFlow and the envs (same seed, same run; MPI rank r uses
seed + 10000 * r); ``load_path``, a model file to continue training from; ``kwargs``, the hyperparameters of
``hyperparams/<alg>.toml`` (named and explained there; missing ones take its ``[defaults]``) and the network
builder's parameters (e.g. ``num_hidden=[400, 300]``). It returns the trained model.
"""
from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from gymnasium import spaces

from common.errors import ConfigError, NonFiniteError
from common.files.model_file import (
    ModelFile,
    ModelFileError,
    first_non_finite,
    save_model_file,
)
from common.files.serialization import (
    check_backed_sizes,
    model_metadata,
    read_model_file,
    restore_model,
    trusted_network,
)
from common.files.space_json import space_from_json

if TYPE_CHECKING:
    from common.nn.policy_export import PolicyGraph

ALGOS_DIR = os.path.dirname(os.path.abspath(__file__))
ALIASES = {"trpo_mpi": "trpo"}
# Constructor arguments every model takes that are not settings from its hyperparameters.
BUILD_ARGUMENTS = {"network", "network_kwargs", "seed", "hyperparameters"}  # names baselines users type for an algorithm of ours


def algorithm_names() -> list[str]:
    """The algorithms of this project: the folders of algos/ holding ``<alg>/<alg>.py``."""
    return sorted(name for name in os.listdir(ALGOS_DIR)
                  if os.path.isfile(os.path.join(ALGOS_DIR, name, f"{name}.py")))


class Model:
    """Base of every algorithm's model: the shared metadata, saving, and acting defaults.

    Subclasses set ``algorithm``, the attributes below, and implement ``predict_batch``, ``get_arrays`` and
    ``set_arrays``; ``hyperparameters`` must hold every keyword of the constructor a file needs to
    rebuild the model (``loader`` passes them back).
    """

    algorithm: ClassVar[str]
    observation_space: spaces.Space
    action_space: spaces.Space
    network: Any
    network_kwargs: dict
    hyperparameters: dict
    num_timesteps: int = 0
    vec_normalize: Any = None  # the training env's live VecNormalize, saved with the model
    vec_normalize_state: dict | None = None  # statistics restored from a file
    env_record: dict | None = None  # how the runner made the env (id, env_kwargs, wrappers), for play from a file

    def predict(self, obs: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True,
                **kwargs: Any) -> tuple[np.ndarray, Any]:
        """Env actions for raw observations, and the next recurrent state.

        ``obs`` is one observation (shaped as the observation space: one action and one env's state come
        back) or a batch with a leading env axis (a batch of actions and states). With one observation,
        ``state``, ``episode_start`` and ``action_masks`` are one env's (with or without the env axis).
        ``kwargs`` go to ``predict_batch`` (``action_masks``, ``rng`` where the model takes them).
        """
        if not is_single_observation(obs, self.observation_space):
            return self.predict_batch(obs, state, episode_start, deterministic, **kwargs)
        if kwargs.get("action_masks") is not None:
            kwargs["action_masks"] = np.asarray(kwargs["action_masks"], bool).reshape(1, -1)
        actions, state = self.predict_batch(
            add_env_axis(obs, self.observation_space), self._one_env_state(state),
            None if episode_start is None else np.asarray(episode_start).reshape(1), deterministic, **kwargs)
        return actions[0], None if state is None else state[0]

    def predict_batch(self, obs: Any, state: Any, episode_start: Any, deterministic: bool,
                      **kwargs: Any) -> tuple[np.ndarray, Any]:
        """Env actions for a batch of raw observations (leading env axis), and the next recurrent state."""
        raise NotImplementedError

    def _one_env_state(self, state: Any) -> Any:
        """One env's recurrent state with the env axis (given with or without it)."""
        if state is None:
            return None
        state = np.asarray(state)
        initial = self.initial_state(1)
        return state[None] if initial is not None and state.ndim == np.ndim(initial) - 1 else state

    def initial_state(self, batch_size: int) -> Any:
        """The recurrent state at an episode start (None: not recurrent)."""
        return None

    def get_arrays(self) -> dict[str, np.ndarray]:
        """Weights, optimizer state and statistics as named arrays."""
        raise NotImplementedError

    def set_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore what ``get_arrays`` returned (``ModelFileError`` for a missing or misshapen weight)."""
        raise NotImplementedError

    def policy_graph(self) -> PolicyGraph:
        """The deterministic policy as TF code over encoded observations, for ``python -m export``
        (``common.nn.policy_export.PolicyGraph``); a model without it cannot be exported."""
        raise NotImplementedError

    def normalization_state(self) -> dict | None:
        """VecNormalize statistics that go with the model: the live training env's, else the file's."""
        live = self.vec_normalize
        return live.get_state() if live is not None else self.vec_normalize_state

    def metadata(self) -> dict:
        """JSON metadata of a saved model."""
        return model_metadata(
            self.algorithm, network=self.network, network_kwargs=self.network_kwargs,
            observation_space=self.observation_space, action_space=self.action_space,
            hyperparameters=self.hyperparameters, num_timesteps=self.num_timesteps,
            vec_normalize_state=self.normalization_state(),
            **({"env": self.env_record} if self.env_record else {}))

    def save(self, path: str) -> None:
        """Write the model file (atomic); NonFiniteError, and no file written, when a weight is NaN or
        infinite (a diverged model never replaces a good file)."""
        arrays = self.get_arrays()
        bad = first_non_finite(arrays)
        if bad is not None:
            raise NonFiniteError(f"model not saved to {path}: {bad} holds NaN or infinity")
        save_model_file(path, self.metadata(), arrays)


def is_single_observation(obs: Any, space: spaces.Space) -> bool:
    """Whether ``obs`` is one observation of ``space`` (shaped as the space) rather than a batch of them.

    A Dict or Tuple observation is one when each of its parts is; ValueError when the parts disagree.
    """
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        keys = list(space.spaces) if isinstance(space, spaces.Dict) else range(len(space.spaces))
        single = {is_single_observation(obs[k], space.spaces[k]) for k in keys}
        if len(single) > 1:
            raise ValueError(f"the parts of this observation disagree on a leading env axis for space {space}")
        return single.pop() if single else False
    return space.shape is not None and np.shape(obs) == tuple(space.shape)


def add_env_axis(obs: Any, space: spaces.Space) -> Any:
    """A batch of one from a single observation of ``space`` (Dict and Tuple observations per part)."""
    if isinstance(space, spaces.Dict):
        return {k: add_env_axis(obs[k], s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(add_env_axis(obs[i], s) for i, s in enumerate(space.spaces))
    return np.asarray(obs)[None]


def constructor_settings(cls: type, hyperparameters: dict, opened: ModelFile | None = None) -> dict[str, Any]:
    """The keyword-only parameters of ``cls``'s constructor found in ``hyperparameters``.

    With ``opened`` (values read from a file) each value must have the type of the parameter's default
    (an int where a float is expected, None where the default is None), and sizes in lists must be
    backed by the file's arrays; otherwise ``ModelFileError``.
    """
    out = {}
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if param.kind is not param.KEYWORD_ONLY or name not in hyperparameters or name in BUILD_ARGUMENTS:
            continue
        value = hyperparameters[name]
        if opened is not None:
            _check_file_value(opened, name, value, param.default)
        out[name] = value
    return out


def _check_file_value(opened: ModelFile, name: str, value: Any, default: Any) -> None:
    kind = type(default)
    if default is None:
        ok = value is None or (isinstance(value, (int, float, str)) and not isinstance(value, bool))
    elif kind is bool:
        ok = isinstance(value, bool)
    elif kind in (int, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (kind is float or type(value) is int)
        ok = ok or (kind is float and isinstance(value, str) and _is_schedule(value))  # a learning-rate schedule
    elif kind in (list, tuple):
        ok = isinstance(value, list) and all(type(v) is int and v > 0 for v in value)
        if ok:
            check_backed_sizes(value, opened, name)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise ModelFileError(f"{opened.path!r}: hyperparameter {name!r} has the wrong type or value ({value!r})")


def _is_schedule(text: str) -> bool:
    """Whether ``text`` is a schedule string such as "lin_3e-4" (``common.schedules`` only parses numbers)."""
    from common.schedules import ScheduleError, make_schedule

    try:
        make_schedule(text)
    except ScheduleError:
        return False
    return True


def loader(model_class: type[Model]) -> Callable[..., Model]:
    """``load(path, env=None, network=None)`` for ``model_class``: rebuild it from a file and restore it.

    With ``env``: its spaces are checked against the file's (``ModelFileError`` on a mismatch) and the
    saved VecNormalize statistics go into ``env``'s VecNormalize, frozen (``training=False``; set it to
    True yourself to keep adapting them). ``network``: the user's own network when the file names one
    outside this project's registry.
    """

    def load(path: str, env: Any = None, network: Any = None) -> Model:
        opened = read_model_file(path, model_class.algorithm, env)
        meta = opened.metadata
        hyper = meta.get("hyperparameters", {})
        if not isinstance(hyper, dict):
            raise ModelFileError(f"{path!r}: metadata field 'hyperparameters' has the wrong type")
        try:
            model = model_class(space_from_json(meta["observation_space"]), space_from_json(meta["action_space"]),
                                network=trusted_network(opened, network), network_kwargs=meta["network_kwargs"],
                                seed=0, **constructor_settings(model_class, hyper, opened))
        except ConfigError as e:  # settings read from the file that the model refuses
            raise ModelFileError(f"{path!r}: {e}") from None
        model.hyperparameters = hyper
        restore_model(model, opened, env, training=False)
        return model

    load.model_class = model_class  # type: ignore[attr-defined]
    load.__doc__ = f"Load a {model_class.algorithm} model file. " + (loader.__doc__ or "").split("\n", 2)[2]
    return load


def algorithm_module(alg: str) -> Any:
    """``algos.<alg>.<alg>`` for one of this project's algorithms (``ModelFileError`` otherwise)."""
    alg = ALIASES.get(alg, alg)
    if alg not in algorithm_names():
        raise ModelFileError(f"unknown algorithm {alg!r}; this project has: {', '.join(algorithm_names())}")
    return importlib.import_module(f"algos.{alg}.{alg}")


def load_model(path: str, env: Any = None, network: Any = None, algorithm: str | None = None) -> Model:
    """Load any model file of this project: the algorithm comes from the file (it must be one of
    ``algorithm_names()``, never a module the file names). ``algorithm``, when given, must agree."""
    found = ModelFile(path).metadata.get("algorithm")
    if not isinstance(found, str) or found not in algorithm_names():
        raise ModelFileError(f"{path!r} holds a model of algorithm {found!r}, which this project does not have")
    if algorithm is not None and ALIASES.get(algorithm, algorithm) != found:
        raise ModelFileError(f"{path!r} holds {_with_article(found)} model, not {_with_article(algorithm)} model")
    return algorithm_module(found).load(path, env, network)


def _with_article(name: str) -> str:
    """``name`` after "a" or "an" as it is read: "an a2c", "a ppo2"."""
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"

"""Abstract vectorized env, wrapper base class and the vec-env error types."""

from __future__ import annotations

import traceback
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Self

import gymnasium as gym
import numpy as np

from common.errors import UserError
from common.vec_env.util import tile_images

VecObs = np.ndarray | dict[str, np.ndarray] | tuple[np.ndarray, ...]
VecStepReturn = tuple[VecObs, np.ndarray, np.ndarray, list[dict]]
Indices = int | Iterable[int] | None


class VecEnvError(RuntimeError):
    """Base class of the errors raised by vectorized envs."""


class EnvWorkerError(VecEnvError, UserError):
    """An env (or its worker process) failed; names the env index and carries the worker traceback."""

    def __init__(self, message: str, env_index: int | None = None, worker_traceback: str = "") -> None:
        full = message if not worker_traceback else f"{message}\n--- worker traceback ---\n{worker_traceback}"
        super().__init__(full)
        self.env_index = env_index
        self.worker_traceback = worker_traceback


def env_traceback(error: EnvWorkerError) -> str:
    """The traceback of the env's own exception: the worker's, or the one the error was raised from."""
    if error.worker_traceback:
        return error.worker_traceback
    cause = error.__cause__
    return "".join(traceback.format_exception(cause)) if cause is not None else ""


class ClosedVecEnvError(VecEnvError):
    """The vec env was used after ``close()``."""


class AlreadySteppingError(VecEnvError):
    """``step_async`` (or another command) was called while a step was pending."""


class NotSteppingError(VecEnvError):
    """``step_wait`` was called without a pending ``step_async``."""


class VecEnv(ABC):
    """A batch of ``num_envs`` environments stepped together.

    Args:
        num_envs: number of environments.
        observation_space: space of one env's observation.
        action_space: space of one env's action.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["human", "rgb_array"]}

    def __init__(self, num_envs: int, observation_space: gym.Space, action_space: gym.Space) -> None:
        self.num_envs = num_envs
        self.observation_space = observation_space
        self.action_space = action_space
        self.reset_infos: list[dict] = [{} for _ in range(num_envs)]
        self.closed = False
        self.waiting = False
        self._seeds: list[int | None] = [None] * num_envs
        self._viewer: Any = None

    # --- the stepping API -------------------------------------------------------------------
    @abstractmethod
    def reset(self) -> VecObs:
        """Reset every env; returns the batched first observation (infos go to ``reset_infos``)."""

    @abstractmethod
    def step_async(self, actions: np.ndarray | Sequence[Any]) -> None:
        """Start stepping every env with ``actions`` (one per env)."""

    @abstractmethod
    def step_wait(self) -> VecStepReturn:
        """Finish the step started by ``step_async``; returns (obs, rewards, dones, infos)."""

    def step(self, actions: np.ndarray | Sequence[Any]) -> VecStepReturn:
        """Step every env with ``actions``; returns (obs, rewards float32, dones bool, infos)."""
        self.step_async(actions)
        return self.step_wait()

    # --- env access -------------------------------------------------------------------------
    @abstractmethod
    def get_attr(self, name: str, indices: Indices = None) -> list[Any]:
        """Attribute ``name`` of the envs at ``indices`` (all when None)."""

    @abstractmethod
    def set_attr(self, name: str, value: Any, indices: Indices = None) -> None:
        """Set attribute ``name`` of the envs at ``indices``."""

    @abstractmethod
    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None, **method_kwargs: Any) -> list[Any]:
        """Call ``method_name`` on the envs at ``indices``; returns the results."""

    @abstractmethod
    def env_is_wrapped(self, wrapper_class: type, indices: Indices = None) -> list[bool]:
        """Whether each env at ``indices`` has a ``wrapper_class`` in its wrapper chain."""

    @abstractmethod
    def get_images(self) -> list[np.ndarray]:
        """One RGB image per env (envs must be made with ``render_mode="rgb_array"``)."""

    def close_extras(self) -> None:
        """Release resources specific to the subclass (called once by ``close``)."""

    def close(self) -> None:
        """Close every env; calling it again does nothing."""
        if self.closed:
            return
        self.closed = True
        if self._viewer is not None:
            self._viewer.close()
            self._viewer = None
        self.close_extras()

    def seed(self, seed: int | None = None) -> list[int | None]:
        """Seed env ``i`` with ``seed + i`` at the next ``reset()`` and seed the action spaces.

        Returns:
            the per-env seeds.
        """
        self._check_open()
        if seed is None:
            self._seeds = [None] * self.num_envs
        else:
            self._seeds = [int(seed) + i for i in range(self.num_envs)]
        self._seed_action_spaces(self._seeds)
        return list(self._seeds)

    def _seed_action_spaces(self, seeds: list[int | None]) -> None:
        """Seed the action space of each env (subclasses forward to the envs)."""

    def _pop_seeds(self) -> list[int | None]:
        seeds, self._seeds = self._seeds, [None] * self.num_envs
        return seeds

    # --- rendering --------------------------------------------------------------------------
    def render(self, mode: str = "human") -> np.ndarray | None:
        """Tile the envs' images; ``"rgb_array"`` returns the tiled image, ``"human"`` shows it."""
        if mode not in ("human", "rgb_array"):
            raise ValueError(f"render mode must be 'human' or 'rgb_array', got {mode!r}")
        bigimg = tile_images(self.get_images())
        if mode == "rgb_array":
            return bigimg
        if self._viewer is None:
            from common.vec_env.viewer import ImageViewer

            self._viewer = ImageViewer()
        self._viewer.imshow(bigimg)
        return None

    # --- helpers ----------------------------------------------------------------------------
    @property
    def unwrapped(self) -> VecEnv:
        """The innermost vec env."""
        return self

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedVecEnvError(f"{type(self).__name__} is closed; create a new one")

    def _take_pending_step(self) -> None:
        """Start ``step_wait``: the env must be open with a step pending, which this call consumes."""
        self._check_open()
        if not self.waiting:
            raise NotSteppingError("step_wait() called without a pending step_async(actions)")
        self.waiting = False

    def _indices(self, indices: Indices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, (int, np.integer)):
            indices = [int(indices)]
        out = [int(i) for i in indices]
        for i in out:
            if not 0 <= i < self.num_envs:
                raise IndexError(f"env index {i} out of range for {self.num_envs} envs")
        return out

    def _check_actions(self, actions: Any) -> None:
        try:
            n = len(actions)
        except TypeError:
            raise TypeError(f"actions must be a sequence or array with one action per env, "
                            f"got {type(actions).__name__}") from None
        if n != self.num_envs:
            raise ValueError(f"got {n} actions for {self.num_envs} envs; pass one action per env "
                             f"(leading axis = env)")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} num_envs={self.num_envs}>"


class VecEnvWrapper(VecEnv):
    """A vec env that transforms another one (``self.venv``); forwards everything it does not change."""

    def __init__(self, venv: VecEnv, observation_space: gym.Space | None = None,
                 action_space: gym.Space | None = None) -> None:
        if not isinstance(venv, VecEnv):
            raise TypeError(f"{type(self).__name__} wraps a VecEnv, got {type(venv).__name__}; "
                            "build one with DummyVecEnv/SubprocVecEnv first")
        self.venv = venv
        super().__init__(venv.num_envs, observation_space or venv.observation_space,
                         action_space or venv.action_space)

    @property
    def reset_infos(self) -> list[dict]:  # type: ignore[override]
        return self.venv.reset_infos

    @reset_infos.setter
    def reset_infos(self, value: list[dict]) -> None:
        pass  # always read through from the wrapped env

    def reset(self) -> VecObs:
        return self.venv.reset()

    def step_async(self, actions: np.ndarray | Sequence[Any]) -> None:
        self.venv.step_async(actions)

    def step_wait(self) -> VecStepReturn:
        return self.venv.step_wait()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.venv.close()

    def seed(self, seed: int | None = None) -> list[int | None]:
        return self.venv.seed(seed)

    def render(self, mode: str = "human") -> np.ndarray | None:
        return self.venv.render(mode)

    def get_images(self) -> list[np.ndarray]:
        return self.venv.get_images()

    def get_attr(self, name: str, indices: Indices = None) -> list[Any]:
        return self.venv.get_attr(name, indices)

    def set_attr(self, name: str, value: Any, indices: Indices = None) -> None:
        self.venv.set_attr(name, value, indices)

    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None, **method_kwargs: Any) -> list[Any]:
        return self.venv.env_method(method_name, *method_args, indices=indices, **method_kwargs)

    def env_is_wrapped(self, wrapper_class: type, indices: Indices = None) -> list[bool]:
        return self.venv.env_is_wrapped(wrapper_class, indices)

    @property
    def unwrapped(self) -> VecEnv:
        return self.venv.unwrapped

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "venv":
            raise AttributeError(name)
        return getattr(self.venv, name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self.venv!r}>"

"""TensorFlow's public namespaces (``tf.nn``, ``tf.compat``, ``tf.data``, ``tf.distribute``, ``tf.lite``, ...)
loaded on first use instead of all at once by ``import tensorflow``.

While ``tensorflow/__init__.py`` runs (``deferred_while_importing``, used by ``common/process/startup.py``), each
``tensorflow._api.v2.*`` module it imports is created empty, with its ``__file__``, ``__path__`` and
``__spec__``, and runs its own imports at the first lookup of a name it lacks. A ppo2 run touches two of them
(``tf.nn``, ``tf.math``), and the import the runner does drops from ~2.7 to ~1.5-2.3 s (bench/README.md,
"bench/startup.py"). Once loaded, every namespace is the module a plain import gives.
``RUNNER_TF_EAGER_NAMESPACES=1`` imports them all at once again.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

from common.env_vars import TF_EAGER_NAMESPACES, env_flag
from common.process.native_logs import quiet_native_logs

EAGER_NAMESPACES_ENV = TF_EAGER_NAMESPACES  # set: TensorFlow imports all its namespaces at once, as usual
_API_PREFIX = "tensorflow._api.v2."  # where TensorFlow's public namespaces live


@contextlib.contextmanager
def deferred_while_importing(tf: types.ModuleType) -> Iterator[None]:
    """Around the execution of ``tensorflow/__init__.py`` (module ``tf``): the namespaces it imports are
    deferred, unless ``RUNNER_TF_EAGER_NAMESPACES`` is set."""
    if env_flag(EAGER_NAMESPACES_ENV):
        yield
        return
    finder = _DeferredNamespaceFinder()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
    _import_packages_named_like_namespaces(tf)


def _import_packages_named_like_namespaces(tf: Any) -> None:
    """Import now the packages of ``tensorflow/`` named like a deferred namespace (``tensorflow/lite``,
    ``tensorflow/distribute``: empty), as the eager import does, so that a later import of one of their
    modules does not put the package in the namespace's place (``tf.lite``); and note them for
    ``_packages_in_namespace_places``."""
    deferred = {name: value for name, value in vars(tf).items() if type(value) is _DeferredModule}
    folder = os.path.dirname(getattr(tf, "__file__", None) or "")
    for name in deferred.keys() & set(os.listdir(folder) if os.path.isdir(folder) else ()):
        package = importlib.import_module(f"{tf.__name__}.{name}")
        setattr(tf, name, deferred[name])
        _SHADOWED.append((tf, name, deferred[name], package))


_SHADOWED: list[tuple[Any, str, Any, Any]] = []  # (tensorflow, name, its namespace, the package of that name)
_loading_depth = 0


@contextlib.contextmanager
def _packages_in_namespace_places() -> Iterator[None]:
    """While a deferred namespace runs its imports: ``tf.lite`` and ``tf.distribute`` are the packages of
    those names, as they were while the eager import ran (TensorFlow's modules write ``import
    tensorflow.distribute.experimental.rpc.kernels.gen_rpc_ops as ...``); the namespaces afterwards."""
    global _loading_depth
    _loading_depth += 1
    if _loading_depth == 1:
        for tf, name, _, package in _SHADOWED:
            setattr(tf, name, package)
    try:
        yield
    finally:
        _loading_depth -= 1
        if _loading_depth == 0:
            for tf, name, namespace, _ in _SHADOWED:
                setattr(tf, name, namespace)


_DEFER_LOCK = threading.RLock()


class _DeferredModule(types.ModuleType):
    """A module whose code runs on the first lookup of a name it does not have yet, or on ``dir()``
    (``__name__``, ``__file__``, ``__path__`` and ``__spec__`` are there from the start); then it is a plain
    module."""

    def __getattr__(self, name: str) -> Any:
        self._load()
        if type(self) is _DeferredModule:  # a lookup by the module's own code while it runs: not there yet
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        return getattr(self, name)

    def __dir__(self) -> list[str]:
        self._load()
        return list(self.__dict__)

    def _load(self) -> None:
        """Run the module's code once; other threads wait for it, and see the module whole."""
        state = object.__getattribute__(self, "__dict__")
        with _DEFER_LOCK:
            loader = state.pop("_deferred_loader", None)
            if loader is None:  # loaded already, or being loaded by this thread
                return
            try:
                with quiet_native_logs(), _packages_in_namespace_places():  # quiet, as TF's import
                    loader.exec_module(self)
            except BaseException:
                state["_deferred_loader"] = loader  # a later lookup retries
                raise
            self.__class__ = types.ModuleType  # from now on lookups go straight to the module


class _DeferringLoader:
    """Creates a ``_DeferredModule`` and leaves running its code to the module's first name lookup."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return _DeferredModule(spec.name)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = module.__spec__.loader = self.loader
        module.__dict__["_deferred_loader"] = self.loader


class _DeferredNamespaceFinder:
    """While ``tensorflow/__init__.py`` runs: its public namespaces (``tf.compat``, ``tf.data``,
    ``tf.distribute``, ``tf.lite``, ...: ~1 s of imports) load when first used, not all at once."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(_API_PREFIX):
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _DeferringLoader(spec.loader)
        return spec

"""MinAtar (Breakout, SpaceInvaders, Asterix, Freeway, Seaquest on a 10x10 grid): an optional extra,
``requirements-minatar.txt``.

Its ids are ``MinAtar/<Game>-v0`` (all 6 actions, as in the MinAtar paper) and ``MinAtar/<Game>-v1`` (the
game's minimal action set); an observation is a bool array (10, 10, channels), one channel per kind of object.
gymnasium 1.x no longer loads the package's plugin entry point, so the ids are registered here on demand: by
``run_util.get_env_type`` for an id of the ``MinAtar/`` namespace, and by ``runner.env_factory.make_env`` in
each (worker) process that makes one (env type ``minatar``).
"""
from __future__ import annotations

import logging
import types

import gymnasium as gym

MINATAR_PREFIX = "MinAtar/"
MINATAR_ENV_TYPE = "minatar"
INSTALL_LINE = "pip install -r requirements-minatar.txt"
GAMES = ("Breakout", "SpaceInvaders", "Asterix", "Freeway", "Seaquest")


def looks_minatar(env_id: str) -> bool:
    """Whether ``env_id`` names a MinAtar env."""
    return env_id.startswith(MINATAR_PREFIX)


def register_minatar_envs() -> bool:
    """Register MinAtar's ids with gymnasium (in this process, once); False when MinAtar is not installed."""
    if f"{MINATAR_PREFIX}{GAMES[0]}-v0" in gym.registry:
        return True
    try:
        minatar_gym = _import_quietly()
    except ImportError:
        return False
    minatar_gym.register_envs()
    return True


def _import_quietly() -> types.ModuleType:
    """``import minatar.gym`` without the warnings it logs when matplotlib or seaborn is missing (it then
    cannot render; training and playing need neither) unless the run is verbose (``common.process.startup``),
    and without the handler that logging them installs on the root logger."""
    from common.process.native_logs import verbose_requested

    root = logging.getLogger()
    handlers, disabled = list(root.handlers), logging.root.manager.disable
    if not verbose_requested():
        logging.disable(logging.WARNING)
    try:
        import minatar.gym
    finally:
        logging.disable(disabled)
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
    return minatar.gym

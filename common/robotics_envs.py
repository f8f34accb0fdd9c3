"""gymnasium-robotics (Fetch, Shadow hand, mazes, ...): an optional extra, ``requirements-robotics.txt``.

Its envs are registered on demand: by ``run_util.get_env_type`` for an id that looks like one of them, and
by ``runner.env_factory.make_env`` in each (worker) process that makes one (env type ``gymnasium_robotics``).
"""
from __future__ import annotations

import gymnasium as gym

ROBOTICS_PREFIXES = ("Fetch", "HandManipulate", "HandReach", "AdroitHand", "PointMaze", "AntMaze", "FrankaKitchen")
ROBOTICS_ENV_TYPE = "gymnasium_robotics"
INSTALL_LINE = "pip install -r requirements-robotics.txt"


def looks_robotics(env_id: str) -> bool:
    """Whether ``env_id`` names a gymnasium-robotics env."""
    return env_id.startswith(ROBOTICS_PREFIXES)


def register_robotics_envs() -> bool:
    """Register gymnasium-robotics' envs with gymnasium (in this process); False when it is not installed."""
    try:
        gymnasium_robotics = _import_without_notice()
    except ImportError:
        return False
    gym.register_envs(gymnasium_robotics)
    return True


def _import_without_notice():
    """``import gymnasium_robotics`` without the Farama notice it prints to stderr for its version (1.4.2:
    a paragraph about the Adroit hand envs' rewards), unless the run is verbose (``common.process.startup``)."""
    from common.process.startup import verbose_requested

    try:
        from farama_notifications import notifications
    except ImportError:
        notifications = {}
    hidden = None if verbose_requested() else notifications.pop("gymnasium_robotics", None)
    try:
        import gymnasium_robotics
    finally:
        if hidden is not None:
            notifications["gymnasium_robotics"] = hidden
    return gymnasium_robotics

"""gymnasium-robotics (Fetch, Shadow hand, mazes, ...): an optional extra, ``requirements-robotics.txt``.

Its envs are registered on demand: by ``run_util.get_env_type`` for an id that looks like one of them, and
by ``common.env_factory.make_env`` in each (worker) process that makes one (env type ``gymnasium_robotics``).
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
        import gymnasium_robotics
    except ImportError:
        return False
    gym.register_envs(gymnasium_robotics)
    return True

"""MinAtar (Breakout, SpaceInvaders, Asterix, Freeway, Seaquest on a 10x10 grid): an optional extra,
``requirements-minatar.txt``.

Its ids are ``MinAtar/<Game>-v0`` (all 6 actions, as in the MinAtar paper) and ``MinAtar/<Game>-v1`` (the
game's minimal action set); an observation is a bool array (10, 10, channels), one channel per kind of object.
gymnasium 1.x no longer loads the package's plugin entry point, so the ids are registered here on demand: by
``run_util.get_env_type`` for an id of the ``MinAtar/`` namespace, and by ``runner.env_factory.make_env`` in
each (worker) process that makes one (env type ``minatar``). Made with ``render_mode="rgb_array"``, an env
draws its grid in numpy (``frame``): uint8 RGB frames a video takes, each cell 16x16 pixels.
"""
from __future__ import annotations

import dataclasses
import logging
import sys
import types
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import WrapperSpec

MINATAR_PREFIX = "MinAtar/"
MINATAR_ENV_TYPE = "minatar"
INSTALL_LINE = "pip install -r requirements-minatar.txt"
GAMES = ("Breakout", "SpaceInvaders", "Asterix", "Freeway", "Seaquest")
CELL_PIXELS = 16  # a 10x10 grid is drawn as 160x160 pixels
RENDER_FPS = 20  # MinAtar's GUI shows a state for 50 ms
DRAWING_MODULES = ("matplotlib", "seaborn")  # imported by MinAtar for drawing only
FRAMES = WrapperSpec("MinAtarFrames", f"{__name__}:MinAtarFrames", {})  # added to each MinAtar id's spec


def looks_minatar(env_id: str) -> bool:
    """Whether ``env_id`` names a MinAtar env."""
    return env_id.startswith(MINATAR_PREFIX)


def register_minatar_envs() -> bool:
    """Register MinAtar's ids with gymnasium (in this process, once), each made inside ``MinAtarFrames``; False
    when MinAtar is not installed."""
    if f"{MINATAR_PREFIX}{GAMES[0]}-v0" not in gym.registry:
        try:
            minatar_gym = _import_quietly()
        except ImportError:
            return False
        minatar_gym.register_envs()
    for env_id in [k for k in gym.registry if looks_minatar(k)]:
        spec = gym.registry[env_id]
        if FRAMES not in spec.additional_wrappers:
            gym.registry[env_id] = dataclasses.replace(spec, additional_wrappers=(*spec.additional_wrappers, FRAMES))
    return True


def palette(n_channels: int) -> np.ndarray:
    """The colours of MinAtar's GUI, (n_channels + 1, 3) uint8: black for an empty cell, then one colour per
    channel, matplotlib's cubehelix map sampled as seaborn's ``color_palette("cubehelix", n_channels)`` does."""
    x = np.linspace(0.0, 1.0, n_channels + 2)[1:-1]
    x = np.minimum((x * 256).astype(int), 255) / 255  # the entries of matplotlib's 256-colour lookup table
    phi = 2 * np.pi * (0.5 / 3 - 1.5 * x)
    amplitude = x * (1 - x) / 2
    coefficients = np.array([[-0.14861, 1.78277], [-0.29227, -0.90649], [1.97294, 0.0]])  # red, green, blue
    rgb = x[:, None] + amplitude[:, None] * (np.cos(phi)[:, None] * coefficients[:, 0] +
                                              np.sin(phi)[:, None] * coefficients[:, 1])
    return np.round(np.vstack([np.zeros((1, 3)), np.clip(rgb, 0.0, 1.0)]) * 255).astype(np.uint8)


def frame(grid: np.ndarray, cell: int = CELL_PIXELS) -> np.ndarray:
    """An RGB image (H * cell, W * cell, 3) uint8 of a MinAtar grid (H, W, channels): each cell a square in the
    colour of its last set channel (as MinAtar's GUI), black when none is set."""
    grid = np.asarray(grid)
    colours = palette(grid.shape[-1])
    index = np.max(grid.astype(np.int64) * np.arange(1, grid.shape[-1] + 1), axis=-1)
    return np.repeat(np.repeat(colours[index], cell, axis=0), cell, axis=1)


class MinAtarFrames(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """A MinAtar env whose ``render()`` in ``rgb_array`` mode returns ``frame`` of its current grid; the other
    render modes are MinAtar's own (made with a render mode, the env loads ``load_drawing_modules``)."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self.metadata = {**env.metadata, "render_fps": RENDER_FPS}
        if env.render_mode is not None:  # MinAtar's own drawing (its window, ``env.unwrapped.render()``)
            load_drawing_modules()

    def render(self) -> Any:
        """The current grid as an RGB frame (``rgb_array``), else what MinAtar's ``render()`` gives."""
        if self.render_mode == "rgb_array":
            return frame(self.env.unwrapped.game.state())
        return self.env.render()


def _import_quietly() -> types.ModuleType:
    """``import minatar.gym`` without matplotlib and seaborn (2-4 s of imports that only MinAtar's own drawing
    uses: ``load_drawing_modules`` gives them to it when an env renders), without the warnings MinAtar logs
    when it cannot import them and without the handler that logging them installs on the root logger."""
    root = logging.getLogger()
    handlers, disabled = list(root.handlers), logging.root.manager.disable
    blocked = [name for name in DRAWING_MODULES if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # ``import name`` raises ImportError
    logging.disable(logging.WARNING)
    try:
        import minatar.gym
    finally:
        for name in blocked:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
        logging.disable(disabled)
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
    return minatar.gym


def load_drawing_modules() -> None:
    """Give MinAtar's modules the matplotlib and seaborn names its GUI and its own ``rgb_array`` frames use
    (``_import_quietly`` imported MinAtar without them); nothing when they are there already."""
    import minatar.environment
    import minatar.gym

    if not hasattr(minatar.environment, "sns"):
        import seaborn
        from matplotlib import colors, pyplot

        minatar.environment.plt, minatar.environment.colors, minatar.environment.sns = pyplot, colors, seaborn
    if not hasattr(minatar.gym, "sns"):
        minatar.gym.sns = minatar.environment.sns

"""Rendering without a display: the OpenGL backend of MuJoCo envs and SDL's drivers for pygame envs.

On a machine with no display (Linux, DISPLAY and WAYLAND_DISPLAY unset) MuJoCo renders off-screen through
EGL, which Mesa provides in software (llvmpipe) when there is no GPU: ``apt-get install libegl1
libegl-mesa0 libgl1-mesa-dri``. ``choose_backend`` picks it before MuJoCo is imported, in the runner and in
every env worker process; a ``MUJOCO_GL`` the user set is kept. Mesa's llvmpipe and TensorFlow cannot
share a process (a segmentation fault), so videos of these envs are rendered in env worker processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import MutableMapping

from common.errors import UserError

GL_ENV_TYPES = ("mujoco", "robotics")  # env types that render with OpenGL (MuJoCo)
HEADLESS_GL = "egl"
GL_PACKAGES = {"egl": "libegl1 libegl-mesa0 libgl1-mesa-dri", "osmesa": "libosmesa6"}
PROBE_TIMEOUT_S = 120.0
# a context made and a pixel read, as gymnasium's off-screen viewer does, in a process without TensorFlow
_PROBE = ("import mujoco; m = mujoco.MjModel.from_xml_string('<mujoco/>'); c = mujoco.GLContext(16, 16); "
          "c.make_current(); mujoco.MjrContext(m, mujoco.mjtFontScale.mjFONTSCALE_100); c.free()")


class RenderBackendError(UserError):
    """No OpenGL backend can render the env's frames on this machine."""


def has_display(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Whether a window can be opened (on Linux: DISPLAY or WAYLAND_DISPLAY is set)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))


def choose_backend(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """Without a display: MUJOCO_GL=egl (and PYOPENGL_PLATFORM to match) unless set, and SDL's dummy video
    driver (pygame envs then render without a window and without stray lines). Returns MUJOCO_GL."""
    if not has_display(environ):
        environ.setdefault("MUJOCO_GL", HEADLESS_GL)
        if environ["MUJOCO_GL"] in GL_PACKAGES:
            environ.setdefault("PYOPENGL_PLATFORM", environ["MUJOCO_GL"])
        environ.setdefault("SDL_VIDEODRIVER", "dummy")
    return environ.get("MUJOCO_GL")


def renders_with_gl(env_type: str) -> bool:
    """Whether envs of ``env_type`` render their frames with OpenGL."""
    return env_type in GL_ENV_TYPES


def check_backend(env_id: str) -> None:
    """Make an off-screen OpenGL context in a fresh process as the env would.

    Raises:
        RenderBackendError: it failed; the message names MUJOCO_GL and the packages to install.
    """
    backend = choose_backend()
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE], check=False, capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        raise RenderBackendError(_failure(env_id, backend, f"no context after {PROBE_TIMEOUT_S:.0f} s")) from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        reason = lines[-1].strip() if lines else f"exit status {done.returncode}"
        raise RenderBackendError(_failure(env_id, backend, reason))


def _failure(env_id: str, backend: str | None, reason: str) -> str:
    """The one line saying why frames of ``env_id`` cannot be rendered and what to install."""
    packages = GL_PACKAGES.get(backend or "", GL_PACKAGES[HEADLESS_GL])
    hint = f"apt-get install {packages}"
    if backend not in GL_PACKAGES:
        hint += f", then unset MUJOCO_GL (or MUJOCO_GL={HEADLESS_GL})"
    return (f"cannot render {env_id} for video: MUJOCO_GL={backend or '(unset)'} cannot make an OpenGL "
            f"context ({reason}); {hint}")

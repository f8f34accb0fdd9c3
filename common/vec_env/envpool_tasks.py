"""Which of the runner's env ids envpool covers, under which task id and settings; and envpool's import.

Atari (``PongNoFrameskip-v4`` or ``ALE/Pong-v5`` -> ``Pong-v5``, with the settings of
``common.wrappers.atari_wrappers``), MuJoCo (``HalfCheetah-v5``, ...) and classic control (``CartPole-v1``,
...) keep envpool's own names. Importing this module does not import envpool.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from common.errors import ConfigError

INSTALL_LINE = "pip install -r requirements-envpool.txt"
COVERED = ("Atari (PongNoFrameskip-v4, ALE/Pong-v5, ...), MuJoCo v4/v5 (HalfCheetah-v5, ...) and classic control "
           "(CartPole-v1, Pendulum-v1, ...)")
ENV_TYPES = ("atari", "mujoco", "classic_control")
MUJOCO_VERSIONS = ("-v4", "-v5")

# make_atari + wrap_deepmind: frame skip 4 (max of the last two frames), up to 30 no-ops at reset, FIRE at reset,
# 84x84 grayscale, no sticky actions, the game's minimal action set, 27,000 steps (108,000 frames) at most.
ATARI_SETTINGS: dict[str, Any] = {
    "frame_skip": 4, "noop_max": 30, "use_fire_reset": True, "img_height": 84, "img_width": 84, "gray_scale": True,
    "repeat_action_probability": 0.0, "full_action_space": False, "max_episode_steps": 27_000,
}
# wrap_deepmind's keyword -> envpool's setting (frame_stack: 4 frames or 1)
ATARI_WRAPPER_SETTINGS = {"episode_life": "episodic_life", "clip_rewards": "reward_clip", "frame_stack": "stack_num"}
ATARI_WRAPPER_DEFAULTS = {"episode_life": True, "clip_rewards": True, "frame_stack": False}
# gymnasium's env keyword -> envpool's setting, where the names differ (ppo2's Ant-v5 entry uses this one)
ENV_KWARG_NAMES = {"include_cfrc_ext_in_observation": "use_contact_force"}


class EnvpoolError(ConfigError):
    """``--vec_env=envpool`` cannot run this env as asked: envpool missing, an env it does not cover, an option
    it does not take."""


def import_envpool() -> ModuleType:
    """The envpool module; EnvpoolError naming the requirements file when it is not installed."""
    try:
        import envpool
    except ImportError as e:
        raise EnvpoolError(f"--vec_env=envpool needs the envpool package, an optional extra: {INSTALL_LINE}") from e
    return envpool


def task_id(env_id: str, env_type: str) -> str:
    """envpool's task id for the runner's ``env_id`` of type ``env_type``; EnvpoolError for other families."""
    if env_type == "atari":
        game = _atari_game(env_id)
        if game:
            return f"{game}-v5"
    elif (env_type == "mujoco" and env_id.endswith(MUJOCO_VERSIONS)) or env_type == "classic_control":
        return env_id
    raise not_covered(env_id)


def not_covered(env_id: str) -> EnvpoolError:
    """The one-line error for an env envpool does not cover."""
    return EnvpoolError(f"--vec_env=envpool covers {COVERED}; not {env_id}: use --vec_env=auto for it")


def _atari_game(env_id: str) -> str:
    if env_id.startswith("ALE/") and env_id.endswith("-v5"):
        return env_id[len("ALE/"):-len("-v5")]
    if env_id.endswith("NoFrameskip-v4"):
        return env_id[:-len("NoFrameskip-v4")]
    return ""


def task_settings(env_type: str, wrapper_kwargs: dict[str, Any] | None = None,
                  env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """envpool's keyword arguments that give the runner's env: for Atari the wrappers' settings (the training
    ones unless ``wrapper_kwargs`` changes ``episode_life``, ``clip_rewards`` or ``frame_stack``), and the
    user's ``env_kwargs`` under envpool's names."""
    settings: dict[str, Any] = {}
    if env_type == "atari":
        wrappers = {**ATARI_WRAPPER_DEFAULTS, **(wrapper_kwargs or {})}
        unknown = sorted(set(wrappers) - set(ATARI_WRAPPER_SETTINGS))
        if unknown:
            raise EnvpoolError(f"--vec_env=envpool does not apply the Atari wrapper option(s) {', '.join(unknown)}")
        settings.update(ATARI_SETTINGS)
        settings.update({ATARI_WRAPPER_SETTINGS[k]: bool(v) for k, v in wrappers.items()})
        settings["stack_num"] = 4 if wrappers["frame_stack"] else 1
    for key, value in (env_kwargs or {}).items():
        settings[ENV_KWARG_NAMES.get(key, key)] = value
    return settings


def check_settings(task: str, settings: dict[str, Any], known: set[str]) -> None:
    """EnvpoolError naming the settings envpool's ``task`` does not take (``known``: its config's names)."""
    unknown = sorted(set(settings) - known - {"render_mode"})
    if unknown:
        raise EnvpoolError(f"envpool's {task} takes no setting {', '.join(unknown)} (--env_kwargs); it takes: "
                           f"{', '.join(sorted(known))}")

"""Run a trained model in a vec env and report episode returns in the env's own reward units.

Returns and lengths come from ``info["episode"]``, which the Monitor that ``make_vec_env`` puts right
around each raw env writes at episode end: before reward scaling, clipping or VecNormalize. For envs
without a Monitor the rewards the vec env returns are summed instead (and the summary says so).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from common.headless_render import has_display  # noqa: F401 - the play env asks here
from common.wrappers.action_mask import VecActionMasks


@dataclass
class PlayResult:
    """What ``play`` saw: one return and length per finished episode."""

    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)  # info["is_success"] at the end of the episodes that report it
    interrupted: bool = False
    raw_units: bool = True  # False when returns were summed from (possibly scaled) vec-env rewards

    def summary(self) -> str:
        """One line: episodes, mean/std/min/max return, mean length."""
        n = len(self.returns)
        stop = " (stopped by Ctrl-C)" if self.interrupted else ""
        if n == 0:
            return f"played 0 complete episodes{stop}"
        r = np.asarray(self.returns, dtype=np.float64)
        units = "" if self.raw_units else " [summed from wrapped rewards: no Monitor found]"
        return (f"played {n} episode{'s' if n != 1 else ''}{stop}: return mean {r.mean():.6g} std {r.std():.3g} "
                f"min {r.min():.6g} max {r.max():.6g}, length mean {np.mean(self.lengths):.1f}{units}"
                f"{success_text(self.successes)}")


def success_text(successes: list[bool]) -> str:
    """', success rate R (k/n)' for episodes that reported ``info["is_success"]``; '' when none did."""
    if not successes:
        return ""
    return f", success rate {np.mean(successes):.3g} ({int(np.sum(successes))}/{len(successes)})"


def play(
    model: Any,
    env: Any,
    episodes: int = 5,
    deterministic: bool = True,
    render: bool = False,
    out: Callable[[str], None] = print,
    max_steps: int | None = None,
    balanced: bool = False,
) -> PlayResult:
    """Act with ``model`` in ``env`` until ``episodes`` episodes finished (0: until Ctrl-C).

    Args:
        model: offers ``predict(obs, state, episode_start, deterministic) -> (actions, state)`` and
            ``initial_state(batch_size)``; recurrent state is carried and reset per finished episode. When
            the env gives action masks (``common.wrappers.action_mask``), ``predict`` gets them as ``action_masks``.
        env: a VecEnv (any number of envs; episodes are counted over all of them).
        episodes: episodes to finish before stopping; 0 plays until Ctrl-C (or ``max_steps``).
        deterministic: the model's deterministic actions; False samples them.
        render: call ``env.render()`` after every step (envs made with render_mode="human" show
            themselves and do not need it).
        out: where the per-episode lines and the summary go.
        max_steps: stop after this many vec-env steps (None: no limit).
        balanced: env i counts at most ``(episodes + i) // num_envs`` episodes, so short episodes
            do not crowd out long ones when several envs play (what evaluation uses).

    Returns:
        the episodes' returns and lengths; Ctrl-C ends the loop early with ``interrupted=True`` (with
        ``episodes`` > 0 it then propagates, after the summary: the command ends too).
    """
    if episodes < 0:
        raise ValueError(f"episodes must be >= 0 (0: until Ctrl-C), got {episodes}")
    n = env.num_envs
    result = PlayResult()
    sums = np.zeros(n, dtype=np.float64)
    lens = np.zeros(n, dtype=np.int64)
    monitored = _is_monitored(env)
    quota = [(episodes + i) // n if balanced and episodes else None for i in range(n)]
    counted = np.zeros(n, dtype=np.int64)
    try:
        obs = env.reset()
        masks = VecActionMasks.of(env) if _takes_masks(model) else None  # the env's action masks, or None
        mask_arg = {}
        state = model.initial_state(n)
        episode_start = np.ones(n, dtype=bool)
        steps = 0
        while (episodes == 0 or len(result.returns) < episodes) and (max_steps is None or steps < max_steps):
            if masks is not None:
                mask_arg["action_masks"] = masks.current
            actions, state = model.predict(obs, state=state, episode_start=episode_start,
                                           deterministic=deterministic, **mask_arg)
            obs, rewards, dones, infos = env.step(actions)
            if masks is not None:
                masks.update(infos, dones)
            steps += 1
            if render:
                env.render()
            sums += rewards
            lens += 1
            for i in range(n):
                ep = infos[i].get("episode")
                finished = ep is not None or (dones[i] and not monitored)
                if finished and (quota[i] is None or counted[i] < quota[i]):
                    counted[i] += 1
                    if ep is None:
                        result.raw_units = False
                    if "is_success" in infos[i]:
                        result.successes.append(bool(infos[i]["is_success"]))
                    _record(result, float(ep["r"] if ep is not None else sums[i]),
                            int(ep["l"] if ep is not None else lens[i]), out)
                if dones[i]:
                    sums[i], lens[i] = 0.0, 0
                if episodes and len(result.returns) >= episodes:
                    break
            episode_start = np.asarray(dones, dtype=bool)
    except KeyboardInterrupt:
        result.interrupted = True
        if episodes:  # a number of episodes was asked: Ctrl-C ends the command, after the summary
            out(result.summary())
            raise
    out(result.summary())
    return result


def renders_text(env: Any) -> bool:
    """Whether the envs of vec env ``env`` draw themselves as text (render modes with "ansi" and without
    "rgb_array", as the games of ``common.games``): they need no display."""
    modes = (env.get_attr("metadata", indices=[0])[0] or {}).get("render_modes", ())
    return "ansi" in modes and "rgb_array" not in modes


def _takes_masks(model: Any) -> bool:
    """Whether ``model.predict`` takes ``action_masks`` (the Discrete/MultiDiscrete models of this project do,
    through the ``predict_batch`` that ``algos.base.Model.predict`` calls)."""
    methods = [getattr(model, name) for name in ("predict", "predict_batch") if hasattr(model, name)]
    try:
        return any("action_masks" in inspect.signature(m).parameters for m in methods)
    except (TypeError, ValueError):
        return False


def _is_monitored(env: Any) -> bool:
    """Whether every env has a Monitor: then only ``info["episode"]`` ends an episode (an atari life
    loss is a ``done`` without it and must not count)."""
    try:
        from common.wrappers.monitor import Monitor

        return all(env.env_is_wrapped(Monitor))
    except (ImportError, AttributeError):
        return False


def _record(result: PlayResult, ret: float, length: int, out: Callable[[str], None]) -> None:
    result.returns.append(ret)
    result.lengths.append(length)
    ret_text = f"{ret:.6g}" if math.isfinite(ret) else str(ret)
    out(f"episode {len(result.returns)}: return {ret_text} length {length}")


def episode_video_wrapper(folder: str, env_id: str) -> str:
    """The ``--wrapper`` spec that writes every episode of an env to ``<folder>/<env>-episode-<k>.mp4``.

    The envs must be made with ``render_mode="rgb_array"``.
    """
    return f"common.vec_env.vec_video_recorder:EpisodeVideo(folder={folder!r}, name_prefix={env_id!r})"

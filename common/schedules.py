"""Schedules: values that change with training progress.

Two families:
- progress schedules (ppo2 style): ``make_schedule(x)`` turns a float, a callable of the
  remaining-progress fraction (1.0 at the start, 0.0 at the end) or a string such as
  ``"lin_2.5e-4"`` / ``"const_1e-3"`` into a callable ``f(frac) -> float``;
- timestep schedules (deepq/ddpg style): objects with ``value(t)``.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from common.errors import ConfigError

ScheduleLike = float | int | str | Callable[[float], float]


class ScheduleError(ConfigError):
    """A schedule specification cannot be understood."""


def constant(value: float) -> Callable[[float], float]:
    """A schedule that always returns ``value``."""
    value = float(value)

    def schedule(_frac: float) -> float:
        return value

    schedule.spec = f"const_{value!r}"  # type: ignore[attr-defined]
    return schedule


def linear(initial: float, final: float = 0.0) -> Callable[[float], float]:
    """A schedule going linearly from ``initial`` (frac=1) to ``final`` (frac=0)."""
    initial, final = float(initial), float(final)

    def schedule(frac: float) -> float:
        return final + (initial - final) * float(frac)

    schedule.spec = f"lin_{initial!r}" if final == 0.0 else f"lin_{initial!r}_{final!r}"  # type: ignore[attr-defined]
    return schedule


def make_schedule(value: ScheduleLike) -> Callable[[float], float]:
    """Turn a float, a callable of the remaining-progress fraction or a string into a schedule.

    Strings: ``"lin_<v>"`` (linear from v to 0), ``"lin_<v0>_<v1>"`` (linear from v0 to v1),
    ``"const_<v>"`` or a plain number such as ``"3e-4"``.
    """
    if isinstance(value, bool):
        raise ScheduleError(f"schedule must be a number, a callable or a string like 'lin_2.5e-4', got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ScheduleError(f"schedule must be a finite number, got {value}")
        return constant(value)
    if isinstance(value, str):
        return _parse(value)
    if callable(value):
        return value
    raise ScheduleError(f"schedule must be a number, a callable or a string like 'lin_2.5e-4', got {value!r}")


def _parse(text: str) -> Callable[[float], float]:
    kind, _, rest = text.strip().partition("_")
    try:
        numbers = [float(p) for p in (rest.split("_") if rest else [kind])]
    except ValueError:
        numbers = []
    if any(not math.isfinite(x) for x in numbers):
        raise ScheduleError(f"schedule {text!r} must hold finite numbers")
    try:
        if kind == "lin" and rest:
            parts = [float(p) for p in rest.split("_")]
            if len(parts) in (1, 2):
                return linear(*parts)
        elif kind == "const" and rest:
            return constant(float(rest))
        elif not rest:
            return constant(float(kind))
    except ValueError:
        pass
    raise ScheduleError(
        f"cannot parse schedule {text!r}; use a number, 'const_<v>', 'lin_<v>' or 'lin_<start>_<end>'"
    )


def schedule_spec(schedule: ScheduleLike) -> str | float:
    """A JSON-friendly description of a schedule (for model metadata)."""
    if isinstance(schedule, (int, float, str)):
        return schedule
    spec = getattr(schedule, "spec", None)
    return spec if spec is not None else getattr(schedule, "__qualname__", repr(schedule))


class ConstantSchedule:
    """``value(t)`` is always the same number."""

    def __init__(self, value: float):
        self._v = float(value)

    def value(self, t: float) -> float:
        """The value at timestep ``t``."""
        return self._v


class LinearSchedule:
    """Linear interpolation from ``initial_p`` to ``final_p`` over ``schedule_timesteps``, then constant."""

    def __init__(self, schedule_timesteps: int, final_p: float, initial_p: float = 1.0):
        if schedule_timesteps <= 0:
            raise ScheduleError(f"schedule_timesteps must be positive, got {schedule_timesteps}")
        self.schedule_timesteps = int(schedule_timesteps)
        self.final_p = float(final_p)
        self.initial_p = float(initial_p)

    def value(self, t: float) -> float:
        """The value at timestep ``t``."""
        fraction = min(float(t) / self.schedule_timesteps, 1.0)
        return self.initial_p + fraction * (self.final_p - self.initial_p)


class PiecewiseSchedule:
    """Linear interpolation between ``(t, value)`` endpoints; ``outside_value`` beyond them."""

    def __init__(self, endpoints: Sequence[tuple[float, float]], outside_value: float | None = None):
        ts = [e[0] for e in endpoints]
        if ts != sorted(ts):
            raise ScheduleError("PiecewiseSchedule endpoints must be sorted by timestep")
        self._endpoints = [(float(t), float(v)) for t, v in endpoints]
        self._outside = outside_value

    def value(self, t: float) -> float:
        """The value at timestep ``t``."""
        for (lt, lv), (rt, rv) in zip(self._endpoints[:-1], self._endpoints[1:]):
            if lt <= t < rt:
                alpha = (t - lt) / (rt - lt)
                return lv + alpha * (rv - lv)
        if self._outside is None:
            raise ScheduleError(f"timestep {t} is outside the schedule's endpoints and no outside_value was given")
        return float(self._outside)

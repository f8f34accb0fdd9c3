"""Hyperparameter tables: ``hyperparams/<alg>.toml`` declares every hyperparameter of an algorithm once.

A table has ``[defaults]`` (the fallback value of each hyperparameter, with its meaning in a comment),
``[types]`` (for values wider than their default's type: ``"schedule"``, ``"float?"`` where ``?`` allows
none; a name listed only here defaults to none), ``[ranges]`` (``name = [low]`` or ``[low, high]``: the
numbers a value may take, inclusive; ``"> low"``: above ``low``; a schedule string's initial value is
checked), ``[choices]`` (``name = ["a", "b"]``: the words a text value may be), ``[aliases.<library>]``
(another library's name of a setting with the same meaning) and ``[unlike]``
(another library's name whose meaning differs here, with what to write instead), and entries that override the defaults:
``[env_type.<type>]`` (or ``[env_type."<type>, <type>"]``, one entry for several types) and ``[env."<id>"]``.
Entries may also set ``network`` and the network builder's
parameters. ``learn()`` calls ``settle`` on its keyword arguments; the runner (``runner.config.resolve``)
merges entries in the order fallback < env type < env id < user file < command line, keeping where each
value came from.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import os
import re
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from common.errors import ConfigError, close_words
from common.schedules import ScheduleLike, make_schedule

TABLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hyperparams")

# baselines' names for parameters that have one name here; accepted everywhere a hyperparameter is.
PARAMETER_ALIASES = {"grad_norm_clipping": "max_grad_norm", "clip_norm": "max_grad_norm",
                     "checkpoint_freq": "save_interval"}


@dataclasses.dataclass(frozen=True)
class Range:
    """The numbers a hyperparameter may take: ``low`` to ``high`` inclusive, or above ``low`` when ``low_open``."""

    low: float
    high: float = math.inf
    low_open: bool = False

    def problem(self, number: float) -> str | None:
        """What is wrong with ``number`` ("must be at least 0"), or None when it is in the range."""
        if self.low_open and number <= self.low:
            return f"must be greater than {self.low}"
        if number < self.low:
            return f"must be at least {self.low}"
        if number > self.high:
            return f"must be at most {self.high}"
        return None

    def text(self) -> str:
        """The range as the user reads it: ">= 0", "> 0", "0 to 1"."""
        if self.high != math.inf:
            return f"{self.low} to {self.high}"
        return f"{'>' if self.low_open else '>='} {self.low}"


# Bounds on network builder parameters whose large values exhaust memory or never finish building.
NETWORK_RANGES: dict[str, Range] = {"num_layers": Range(0, 100), "num_hidden": Range(1, 65536),
                                   "nlstm": Range(1, 65536)}

_TYPE_NAMES: dict[str, Any] = {"int": int, "float": float, "bool": bool, "str": str, "list": list,
                               "schedule": ScheduleLike, "float|str": float | str,
                               "bool|str": bool | str}


class Table:
    """One algorithm's hyperparameters: names, fallback values, types, and the shipped entries."""

    def __init__(self, name: str, defaults: dict[str, Any], kinds: dict[str, Any],
                 by_env_type: dict[str, dict] | None = None, by_env_id: dict[str, dict] | None = None,
                 source: str = "", ranges: dict[str, Range] | None = None) -> None:
        self.name, self.defaults, self.kinds, self.ranges = name, defaults, kinds, ranges or {}
        self.by_env_type, self.by_env_id = by_env_type or {}, by_env_id or {}
        self.env_type_headers: dict[str, str] = {}  # env type -> the TOML header of its entry
        self.source = source or name
        self.ranges_source = f"{self.source} [ranges]"
        self.choices: dict[str, tuple[str, ...]] = {}  # the words a text value may be, per hyperparameter
        self.aliases: dict[str, tuple[str, str]] = {}  # another library's name -> (ours, the library)
        self.unlike: dict[str, str] = {}  # another library's name that means something else -> what to write

    def canonical(self, key: str) -> str:
        """The table's name for ``key``: an alias of another library (``learning_rate`` -> ``lr``) or of
        baselines (``PARAMETER_ALIASES``) mapped, any other name as it is."""
        if key in self.aliases:
            return self.aliases[key][0]
        return PARAMETER_ALIASES[key] if PARAMETER_ALIASES.get(key) in self.kinds else key

    def unknown(self, key: str, choices: list[str], runner_flags: Iterable[str] = ()) -> str:
        """What to say after "does not accept KEY": what to write instead (``[unlike]``), else the close
        runner flags and names, else every name."""
        if key in self.unlike:
            return f"; {self.unlike[key]}"
        flags = close_words(key, runner_flags)
        names = [self.canonical(n) for n in close_words(key, [*choices, *self.aliases]).split(", ") if n]
        hits = [f"--{f} (a runner flag)" for f in flags.split(", ") if f] + list(dict.fromkeys(names))
        if hits:
            return f"; close matches: {', '.join(hits)}"
        return f"; it accepts: {', '.join(sorted(choices))}"

    @classmethod
    def from_signature(cls, name: str, fn: Callable[..., Any],
                       skip: tuple[str, ...] = ("env", "network", "total_timesteps", "seed")) -> Table:
        """The table of a function's keyword parameters (an algorithm outside this project, a network builder)."""
        try:
            hints = typing.get_type_hints(fn)
        except (NameError, TypeError, AttributeError):
            hints = {}
        defaults, kinds = {}, {}
        for pname, p in inspect.signature(fn).parameters.items():
            if pname in skip or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            defaults[pname] = None if p.default is inspect.Parameter.empty else p.default
            kinds[pname] = hints.get(pname, _type_of_default(p.default))
        return cls(name, defaults, kinds, source=f"{getattr(fn, '__module__', '')}.{getattr(fn, '__name__', '')}")

    def check(self, key: str, value: Any, where: str = "") -> Any:
        """``value`` for hyperparameter ``key`` (integral floats made ints for int parameters); ConfigError
        when it has the wrong type or is outside the key's range."""
        value = checked_value(key, value, self.kinds[key], where)
        if isinstance(value, str) and key in self.choices and value not in self.choices[key]:
            words = ", ".join(repr(w) for w in self.choices[key])
            raise ConfigError(f"{where}{key} must be one of {words} ({self.source} [choices]), got {value!r}")
        if key in self.ranges:
            number = make_schedule(value)(1.0) if self.kinds[key] is ScheduleLike and isinstance(value, str) else value
            check_range(key, number, self.ranges[key], self.ranges_source, where)
        return value


def check_range(key: str, value: Any, bounds: Range, limit_source: str, where: str = "") -> None:
    """ConfigError naming the limit when the number ``value`` (or a number of the list ``value``) is outside
    ``bounds``; values of other types pass."""
    for number in value if isinstance(value, (list, tuple)) else [value]:
        if not isinstance(number, (int, float)) or isinstance(number, bool):
            continue
        problem = bounds.problem(number)
        if problem:
            raise ConfigError(f"{where}{key} {problem} ({limit_source}), got {number}")


def _type_of_default(default: Any) -> Any:
    if default is inspect.Parameter.empty or default is None or callable(default):
        return None
    if type(default) is float:  # unannotated float: a number or a schedule spec such as "lin_1e-3"
        return float | str
    return type(default) if type(default) in (bool, int, str, list, tuple) else None


def fits(value: Any, tp: Any) -> bool:
    """Whether ``value`` (a Python or TOML literal) is acceptable for annotation ``tp`` (None: anything)."""
    if tp is None or tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, arm) for arm in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    from collections.abc import Callable as AbcCallable

    if tp is AbcCallable or origin is AbcCallable:
        return callable(value)
    if origin in (list, tuple, dict, set) or typing.get_origin(tp) is typing.Sequence:
        return isinstance(value, (list, tuple) if origin in (list, tuple) else origin)
    if tp in (list, tuple):
        return isinstance(value, (list, tuple))
    if isinstance(tp, type) and tp in (dict, set):
        return isinstance(value, tp)
    return True


def describe(tp: Any) -> str:
    """A type as the user would write it."""
    if tp is ScheduleLike:
        return "number or schedule ('lin_<v>', 'lin_<v0>_<v1>', 'const_<v>')"
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "").replace("collections.abc.", "")


def checked_value(key: str, value: Any, tp: Any, where: str = "") -> Any:
    """``value`` checked against ``tp``; 1e6-style floats become ints where an int is expected."""
    if isinstance(value, float) and value.is_integer() and not fits(value, tp) and fits(int(value), tp):
        value = int(value)
    if not fits(value, tp):
        raise ConfigError(f"{where}{key} expects {describe(tp)}, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}{key} must be a finite number, got {value}")
    if tp is ScheduleLike and isinstance(value, str):
        try:
            make_schedule(value)
        except ConfigError as e:
            raise ConfigError(f"{where}{key}: {e}") from None
    return value


def _range(spec: Any, where: str) -> Range:
    if isinstance(spec, str) and spec.startswith(">"):
        try:
            low = float(spec[1:])
        except ValueError:
            low = math.nan
        if math.isfinite(low):
            return Range(int(low) if low.is_integer() else low, low_open=True)
    ok = (isinstance(spec, list) and len(spec) in (1, 2)
          and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in spec))
    if not ok:
        raise ConfigError(f'{where}: expected [low], [low, high] or "> low", got {spec!r}')
    return Range(spec[0], spec[1] if len(spec) == 2 else math.inf)


def _choices(section: Any, kinds: Mapping[str, Any], where: str) -> dict[str, tuple[str, ...]]:
    """``[choices]`` as name -> the words its text value may be, checked."""
    out = {}
    for key, words in section.items():
        if key not in kinds:
            raise ConfigError(f"{where}: {key} is not a hyperparameter of the table")
        if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
            raise ConfigError(f"{where} {key}: expected a list of words, got {words!r}")
        out[key] = tuple(words)
    return out


def _kind(spec: Any, where: str) -> Any:
    if not isinstance(spec, str) or spec.rstrip("?") not in _TYPE_NAMES:
        raise ConfigError(f"{where}: type {spec!r} is not one of {', '.join(_TYPE_NAMES)} (optionally with ?)")
    base = _TYPE_NAMES[spec.rstrip("?")]
    return base | None if spec.endswith("?") else base


@functools.cache
def table(algorithm: str) -> Table:
    """The table of an algorithm of this project (``hyperparams/<algorithm>.toml``)."""
    path = os.path.join(TABLES_DIR, f"{algorithm}.toml")
    data = _table_data(algorithm)
    rel = os.path.relpath(path, os.path.dirname(TABLES_DIR))
    defaults, kinds = dict(data.get("defaults", {})), {}
    for key, value in defaults.items():
        kinds[key] = _type_of_default(value) if not isinstance(value, float) else float
    for key, spec in data.get("types", {}).items():
        kinds[key] = _kind(spec, f"{rel} [types] {key}")
        defaults.setdefault(key, None)
    ranges = {key: _range(spec, f"{rel} [ranges] {key}") for key, spec in data.get("ranges", {}).items()}
    unknown = [key for key in ranges if key not in kinds]
    if unknown:
        raise ConfigError(f"{rel} [ranges]: {unknown[0]} is not a hyperparameter of the table")
    found = Table(f"algorithm '{algorithm}'", defaults, kinds, source=rel, ranges=ranges)
    found.choices = _choices(data.get("choices", {}), kinds, f"{rel} [choices]")
    found.aliases = _aliases(data.get("aliases", {}), kinds, rel)
    found.unlike = dict(data.get("unlike", {}))
    clash = [key for key in found.unlike if key in kinds or key in found.aliases]
    if clash or not all(isinstance(text, str) for text in found.unlike.values()):
        raise ConfigError(f"{rel} [unlike]: {clash[0] if clash else 'each'} must be a text about a name not accepted")
    found.by_env_type = {}
    for env_type, (header, entry) in env_type_entries(data.get("env_type", {}), rel).items():
        found.by_env_type[env_type] = found_entry(found, entry, f"{rel} {header}")
        found.env_type_headers[env_type] = header
    found.by_env_id = {k: found_entry(found, v, f'{rel} [env."{k}"]') for k, v in data.get("env", {}).items()}
    return found


def env_type_entries(sections: Any, where: str) -> dict[str, tuple[str, Any]]:
    """``[env_type.<type>]`` tables as env type -> (the TOML header, the entry). One entry serves several env
    types when its name lists them: ``[env_type."classic_control, box2d"]``. An env type named by two entries
    is a ConfigError."""
    if not isinstance(sections, Mapping):
        raise ConfigError(f"{where}: [env_type] must hold tables of hyperparameters")
    out: dict[str, tuple[str, Any]] = {}
    for name, entry in sections.items():
        header = f'[env_type."{name}"]' if "," in name else f"[env_type.{name}]"
        for env_type in (part.strip() for part in name.split(",")):
            if not env_type:
                raise ConfigError(f"{where} {header}: an empty env type in the list")
            if env_type in out:
                raise ConfigError(f"{where} {header}: env type {env_type} already has the entry {out[env_type][0]}")
            out[env_type] = (header, entry)
    return out


INHERITED_SECTIONS = ("defaults", "types", "ranges", "choices", "aliases", "unlike")


def _table_data(algorithm: str) -> dict[str, Any]:
    """The TOML data of ``hyperparams/<algorithm>.toml``; with ``extends = "<alg>"`` at its top, that table's
    [defaults], [types], [ranges], [choices], [aliases] and [unlike] under its own (the env entries are its own only)."""
    with open(os.path.join(TABLES_DIR, f"{algorithm}.toml"), "rb") as f:
        data = tomllib.load(f)
    base = data.pop("extends", None)
    if base is None:
        return data
    parent = _table_data(str(base))
    for section in INHERITED_SECTIONS:
        data[section] = {**parent.get(section, {}), **data.get(section, {})}
    return data


def _aliases(sections: Any, kinds: Mapping[str, Any], rel: str) -> dict[str, tuple[str, str]]:
    """``[aliases.<library>]`` tables as alias -> (name of the table, library), checked."""
    out = {}
    for library, names in sections.items():
        for alias, name in (names.items() if isinstance(names, Mapping) else [(library, names)]):
            if not isinstance(name, str) or name not in kinds or alias in kinds or alias in out:
                raise ConfigError(f"{rel} [aliases.{library}] {alias}: must name a hyperparameter of the table, once")
            out[alias] = (name, library)
    return out


@functools.cache
def meanings(algorithm: str) -> dict[str, str]:
    """Each hyperparameter's meaning: the comment after it under ``[defaults]`` or ``[types]`` of
    ``hyperparams/<algorithm>.toml``, with the comment lines that continue it (and those of the table it
    ``extends``)."""
    out: dict[str, str] = {}
    section, last = "", None
    with open(os.path.join(TABLES_DIR, f"{algorithm}.toml"), encoding="utf-8") as f:
        text = f.read()
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("["):
            section, last = stripped.split("]")[0] + "]", None
        elif section in ("[defaults]", "[types]") and (found := re.match(r"(\w+)\s*=[^#]*#\s*(.*)$", line)):
            last = found.group(1)
            out[last] = found.group(2).strip() if last not in out else out[last]
        elif last and line[:1].isspace() and stripped.startswith("#"):
            out[last] += " " + stripped.lstrip("#").strip()
        else:
            last = None
    if (found := re.search(r'^extends\s*=\s*"(\w+)"', text, re.MULTILINE)) is not None:
        return {**meanings(found.group(1)), **out}
    return out


# Network parameters an entry may set for the image networks, passed over for the others (the Atari entries'
# compute_dtype must neither refuse --network=mlp on RAM observations nor change its float32 arithmetic); given
# on the command line they are checked and apply to every network that has them.
ENTRY_NETWORK_OPTIONS = frozenset({"compute_dtype"})


def found_entry(tab: Table, entry: Any, where: str) -> dict[str, Any]:
    """An entry's keys checked against ``tab`` (network builder parameters pass; ``settle`` checks them)."""
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: expected a table of hyperparameters, got {type(entry).__name__}")
    out = {}
    for key, value in entry.items():
        if tab.canonical(key) in tab.kinds:
            key = tab.canonical(key)
            out[key] = tab.check(key, value, f"{where}: ")
        else:
            out[key] = value  # "network" or a network parameter: checked when the network is known
    return out


def network_table(network: Any) -> Table | None:
    """The table of a network builder's parameters (None for a callable network we cannot inspect)."""
    from common.nn.models import (
        get_network_builder,  # imports TensorFlow: only when a check needs it
    )

    if callable(network):
        return None
    try:
        builder = get_network_builder(network if network is not None else "mlp")
    except ValueError as e:
        raise ConfigError(str(e)) from None
    found = Table.from_signature(f"network '{network or 'mlp'}'", builder, skip=())
    found.ranges = {k: bounds for k, bounds in NETWORK_RANGES.items() if k in found.kinds}
    found.ranges_source = "algos/hyperparameters.py NETWORK_RANGES"
    return found


def settle(tab: Table, given: Mapping[str, Any], network: Any, where: Mapping[str, str] | None = None,
           network_kwargs_allowed: bool = True,
           runner_flags: Iterable[str] = ()) -> tuple[types.SimpleNamespace, dict[str, Any]]:
    """(hyperparameters, network kwargs) of one ``learn()`` call: every name of ``given`` checked (other
    libraries' names of the table's ``[aliases]`` mapped), the table's defaults for the missing ones. Names
    the table lacks must be parameters of ``network``'s builder. ``where`` maps a name to the prefix that
    says where its value came from ("--" for the command line, "FILE [entry]: " for a file), for one-line
    ConfigErrors; ``runner_flags`` are suggested for an unknown name close to one."""
    values, network_kwargs = dict(tab.defaults), {}
    net_table = None
    for key, value in given.items():
        prefix = (where or {}).get(key, "")
        name = tab.canonical(key)
        if name in tab.kinds:
            values[name] = tab.check(name, value, prefix)
            continue
        if key in ENTRY_NETWORK_OPTIONS and prefix and not prefix.startswith("--") and (network or "mlp") == "mlp":
            continue  # an entry's option for the image networks: the mlp keeps float32 unless the command line asks
        if network_kwargs_allowed and key not in tab.unlike:
            net_table = net_table or network_table(network)
        if network_kwargs_allowed and net_table is None and key not in tab.unlike:
            network_kwargs[key] = value
        elif net_table is not None and key in net_table.kinds:
            network_kwargs[key] = net_table.check(key, value, prefix)
        elif key in ENTRY_NETWORK_OPTIONS and prefix and not prefix.startswith("--"):
            continue  # an entry's option for the networks that have it (compute_dtype: the image networks)
        else:
            choices = list(tab.kinds) + list(net_table.kinds if net_table is not None else ())
            hint = tab.unknown(key, choices, runner_flags)
            if prefix.startswith("--") or not prefix:
                raise ConfigError(f"{tab.name} does not accept {prefix}{key}{hint}")
            raise ConfigError(f"{prefix}{key} is neither a hyperparameter of {tab.name} nor a parameter of "
                              f"{net_table.name if net_table is not None else 'its network'}{hint}")
    return types.SimpleNamespace(**values), network_kwargs


def recorded(hp: types.SimpleNamespace, **extra: Any) -> dict[str, Any]:
    """The hyperparameters as saved in a model file: JSON values, schedules as their spec strings."""
    from common.schedules import schedule_spec

    out = {k: schedule_spec(v) if callable(v) else v for k, v in {**vars(hp), **extra}.items()}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


RUNNER_ENTRY_KEYS = ("vec_normalize", "num_env", "env_kwargs")  # entries' keys the runner takes, not learn()


def shipped_entry(algorithm: str, env_type: str | None = None, env_id: str | None = None) -> dict[str, Any]:
    """The shipped settings of ``hyperparams/<algorithm>.toml`` for an env type and/or id (id wins), as ``learn()``
    takes them: the runner's own keys of an entry (``vec_normalize``, ``num_env``, ``env_kwargs``) are left out."""
    tab = table(algorithm)
    entry = {**tab.by_env_type.get(env_type or "", {}), **tab.by_env_id.get(env_id or "", {})}
    return {k: v for k, v in entry.items() if k not in RUNNER_ENTRY_KEYS}

"""The runner's configuration, resolved once: env type and id, algorithm, network, and every learn
keyword with the place its value came from.

Entries may also set ``network``, ``vec_normalize`` (the runner wraps the training env in VecNormalize),
``env_kwargs`` (a table for ``gym.make``; ``--env_kwargs`` keys win over it) and ``num_env`` (the envs stepped
in parallel on each rank, rl-zoo's ``n_envs``; ``--num_env`` wins over it). Where no source sets ``num_env``,
an algorithm made for many envs gets its own default (a2c: 8; ``algos.capabilities``), atari and retro one
env per CPU core (``runner.envs.build_env``), the others 1. A ``--hyperparams`` file holds
values: its ``network`` is a registered name (``module:builder`` only from the command line, ``common.trust``).
Hyperparameters are layered, last wins: the algorithm's defaults < the shipped entry for the env type
< the shipped entry for the env id < the ``--hyperparams`` file < the command line.
"""
from __future__ import annotations

import dataclasses
import inspect
import os
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

from algos import hyperparameters
from algos.capabilities import default_num_env
from algos.hyperparameters import Table, describe, env_type_entries, settle, table
from common.games.parallel import ENV_TYPE as MULTIAGENT
from common.trust import names_module, require_on_command_line
from common.wrappers.user_wrappers import parallel_wrapper, wrapper_class
from run_util import (
    UsageError,
    check_algorithm_name,
    get_alg_module,
    get_env_type,
    get_learn_function,
    read_small_file,
)

FROM_COMMAND_LINE = "command line"
FROM_DEFAULTS = "defaults"
CPU_COUNT_ENV_TYPES = ("atari", "retro")  # one training env per CPU core when no source sets num_env


@dataclasses.dataclass
class RunConfig:
    """Everything a run needs, resolved once from the runner's flags."""

    args: Any  # the runner's flags, every one present
    env_type: str
    env_id: str
    make_id: str  # the id for gym.make (``module:EnvId`` keeps its module)
    learn: Callable[..., Any]
    network: Any
    vec_normalize: bool  # wrap the training env in VecNormalize (observations and rewards)
    env_kwargs: dict[str, Any]  # for gym.make: an entry's env_kwargs updated with --env_kwargs
    num_env: int | None  # training envs per rank: --num_env, else an entry's, else the algorithm's default
    # (a2c's 8), else None (the runner's choice: one per CPU core for atari, else 1)
    wrappers: list[str]  # --wrapper specs, applied inside each env's Monitor
    learn_kwargs: dict[str, Any]  # hyperparameters and network parameters passed to learn (defaults left out)
    sources: dict[str, str]  # where each value of ``learn_kwargs`` (and ``network``) came from
    hyperparameters: dict[str, Any]  # every hyperparameter's value, the algorithm's defaults included
    notes: list[str] = dataclasses.field(default_factory=list)  # lines for the user: names mapped, values dropped

    def env_record(self) -> dict[str, Any]:
        """How the env was made, saved in model files so play and evaluation rebuild it."""
        return {"env": self.args.env, "env_kwargs": self.env_kwargs, "wrappers": self.wrappers}

    def record(self) -> dict[str, Any]:
        """The configuration as written to config.json."""
        return {
            "alg": self.args.alg, "env": self.args.env, "env_id": self.env_id, "env_type": self.env_type,
            "num_timesteps": self.args.num_timesteps, "seed": self.args.seed,
            "learn_kwargs": {**self.learn_kwargs, "network": self.network}, "vec_normalize": self.vec_normalize,
            "num_env": self.num_env, "learn_kwarg_sources": self.sources, "hyperparameters": self.hyperparameters,
            "env_record": self.env_record(), "runner_args": vars(self.args),
        }

    def describe(self) -> str:
        """Lines naming each value that is not the algorithm's default and where it came from."""
        order = "command line > --hyperparams file > env id entry > env type entry > defaults"
        lines = [f"Hyperparameters ({order}):"]
        shown = {"network": self.network, "vec_normalize": self.vec_normalize, **self.learn_kwargs}
        if "num_env" in self.sources:
            shown["num_env"] = self.num_env
        if self.env_kwargs:
            shown["env_kwargs"] = self.env_kwargs
        for key, value in shown.items():
            lines.append(f"  {key} = {value!r}  [{self.sources.get(key, FROM_DEFAULTS)}]")
        return "\n".join(lines)


def default_network(env_type: str) -> str | None:
    """The runner's network choice for an env type: "cnn" for atari, else None (the algorithm's)."""
    return "cnn" if env_type == "atari" else None


def algorithm_table(alg: str, env_type: str, env_id: str) -> tuple[Table, list[tuple[str, Mapping[str, Any]]]]:
    """The algorithm's table and its shipped entries for this env, lowest precedence first.

    An algorithm of this project has ``hyperparams/<alg>.toml``; one outside (``package.module:function``)
    has its function's signature and, if its module has one, ``defaults(env_type) -> dict``.
    """
    if ":" in alg:
        fn = getattr(get_alg_module(alg), "defaults", None)
        entry = dict(fn(env_type)) if callable(fn) else {}
        learn = get_learn_function(alg)
        return Table.from_signature(f"algorithm '{alg}'", learn), [(f"{alg} defaults({env_type!r})", entry)]
    tab = table(check_algorithm_name(alg))
    header = tab.env_type_headers.get(env_type, f"[env_type.{env_type}]")
    return tab, [(f"{tab.source} {header}", tab.by_env_type.get(env_type, {})),
                 (f'{tab.source} [env."{env_id}"]', tab.by_env_id.get(env_id, {}))]


def user_file_entries(path: str | None, env_type: str, env_id: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The entries of a ``--hyperparams`` file that apply to this env, lowest precedence first: its
    top-level keys, then ``[env_type.<type>]`` (or a ``[env_type."<type>, <type>"]`` that lists it), then
    ``[env."<id>"]``."""
    if not path:
        return []
    text = read_small_file(path, "--hyperparams")
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise UsageError(f"--hyperparams {path}: not UTF-8 text (byte {e.start}); TOML files are UTF-8") from None
    except (tomllib.TOMLDecodeError, RecursionError) as e:
        raise UsageError(f"--hyperparams {path}: not valid TOML ({type(e).__name__}: {e})") from None
    top = {k: v for k, v in data.items() if k not in ("env", "env_type")}
    by_id = data.get("env", {})
    for name, tables in (("env_type", data.get("env_type", {})), ("env", by_id)):
        bad = [k for k, v in tables.items() if not isinstance(v, dict)] if isinstance(tables, dict) else [name]
        if bad:
            raise UsageError(f"--hyperparams {path}: [{name}.{bad[0]}] must be a table of hyperparameters")
    header, by_type = env_type_entries(data.get("env_type", {}), f"--hyperparams {path}").get(
        env_type, (f"[env_type.{env_type}]", {}))
    return [(f"{path}", top), (f"{path} {header}", by_type), (f'{path} [env."{env_id}"]', by_id.get(env_id, {}))]


def settings_help(args: Any, extra: Mapping[str, Any]) -> str:
    """``--alg=ALG --help``: each of the algorithm's settings with its value for ``--env`` (when given), where
    that value comes from, its meaning, type and range; then what the entries set besides."""
    env_type, env_id = get_env_type(args.env, args.env_type) if args.env else (args.env_type or "", "")
    tab, shipped = algorithm_table(args.alg, env_type, env_id)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for source, entry in [*shipped, *user_file_entries(args.hyperparams, env_type, env_id), (FROM_COMMAND_LINE, extra)]:
        for key, value in entry.items():
            values[_canonical(tab, key)[0]], sources[_canonical(tab, key)[0]] = value, source
    if "num_env" not in values and args.num_env is None and (found := runner_num_env(args.alg, env_type)):
        values["num_env"], sources["num_env"] = found
    meanings = {} if ":" in args.alg else hyperparameters.meanings(check_algorithm_name(args.alg))
    where = f" on {env_id}" if env_id else ""
    lines = [f"settings of {args.alg}{where} (--name=value  [where the value comes from]  type, range):"]
    for name, kind in tab.kinds.items():
        limit = f", {tab.ranges[name].text()}" if name in tab.ranges else ""
        if name in tab.choices:
            limit = f", one of {', '.join(tab.choices[name])}"
        value = values.pop(name, tab.defaults[name])
        lines.append(f"  --{name}={value}  [{sources.get(name, FROM_DEFAULTS)}]  {describe(kind)}{limit}")
        lines += [f"      {meanings[name]}"] if meanings.get(name) else []
        also = [f"--{alias} ({library})" for alias, (ours, library) in tab.aliases.items() if ours == name]
        lines += [f"      also written {', '.join(also)}"] if also else []
    if values:
        lines.append("set by the entries or the runner besides (network, its parameters, env options, num_env):")
        lines += [f"  {key} = {value!r}  [{sources[key]}]" for key, value in values.items()]
    return "\n".join(lines)


def _has_var_keyword(learn: Callable[..., Any]) -> bool:
    return any(p.kind == p.VAR_KEYWORD for p in inspect.signature(learn).parameters.values())


def resolve(args: Any, extra: Mapping[str, Any]) -> RunConfig:
    """The run's configuration from complete runner flags ``args`` and the command line's extra
    ``--key=value`` settings; every value checked (UsageError or ConfigError, one line)."""
    env_type, env_id = get_env_type(args.env, args.env_type)
    make_id = args.env.split(":", 1)[0] + ":" + env_id if ":" in args.env else env_id
    tab, shipped = algorithm_table(args.alg, env_type, env_id)
    user_file = user_file_entries(args.hyperparams, env_type, env_id)
    layers = [*shipped, *user_file, (FROM_COMMAND_LINE, extra)]
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    notes = list(args.flag_notes)
    for source, entry in layers:
        notes += _map_aliases(tab, source, entry)
        for key, value in entry.items():
            key = _canonical(tab, key)[0]
            values[key], sources[key] = value, source
    network = values.pop("network", None)
    vec_normalize = values.pop("vec_normalize", False)
    if not isinstance(vec_normalize, bool):
        raise UsageError(f"{where_of('vec_normalize', sources)}vec_normalize expects bool, got {vec_normalize!r}")
    env_kwargs = _entry_env_kwargs(values.pop("env_kwargs", {}), sources)
    num_env = _entry_num_env(values.pop("num_env", None), sources)
    if args.num_env is not None:
        num_env, sources["num_env"] = args.num_env, FROM_COMMAND_LINE
    elif num_env is None and (found := runner_num_env(args.alg, env_type)):
        num_env, sources["num_env"] = found
    notes += one_env_notes(args.alg, num_env, sources.get("num_env"), [source for source, _ in user_file])
    if args.env_kwargs_from_file:  # the model file's env, as it was made (run._fill_from_file)
        env_kwargs, sources["env_kwargs"] = dict(args.env_kwargs), f"model file {args.load_path}"
    elif args.env_kwargs:
        env_kwargs.update(args.env_kwargs)
        sources["env_kwargs"] = FROM_COMMAND_LINE
    if args.network:
        network, sources["network"] = args.network, FROM_COMMAND_LINE
    elif network is None and default_network(env_type):
        network, sources["network"] = default_network(env_type), f"runner default for {env_type}"
    elif sources.get("network") in {source for source, _ in user_file}:
        _check_file_network(network, sources["network"])
    notes += _drop_misfits(values, sources, network, [source for source, _ in shipped])
    where = {k: where_of(k, sources) for k in sources}
    if "self_play" in values and "self_play" not in tab.kinds:
        raise UsageError(f"{where['self_play']}self_play: algorithm '{args.alg}' cannot self-play "
                         f"(self-play is for the on-policy algorithms: {', '.join(SELF_PLAY_ALGORITHMS)})")
    external = get_learn_function(args.alg) if ":" in args.alg else None  # imported already for its table
    hp, network_kwargs = settle(tab, values, network if network is not None else "mlp", where,
                                network_kwargs_allowed=external is None or _has_var_keyword(external),
                                runner_flags=vars(args))
    learn_kwargs = {k: getattr(hp, k) for k in values if k not in network_kwargs and k in vars(hp)}
    learn_kwargs.update(network_kwargs)
    learn = external or get_learn_function(args.alg)  # imports ours (and TensorFlow): after the cheap checks
    if args.load_path is not None and args.num_timesteps > 0:
        if "load_path" not in inspect.signature(learn).parameters:
            raise UsageError(f"algorithm '{args.alg}' cannot continue training from --load_path "
                             "(its learn() has no load_path); use --num_timesteps=0 to play a model")
        learn_kwargs["load_path"], sources["load_path"] = os.path.abspath(args.load_path), FROM_COMMAND_LINE
    wrappers = [str(w) for w in (args.wrapper or [])]
    if env_type == MULTIAGENT and (args.play_video or args.save_video_interval):
        raise UsageError(f"--play_video and --save_video_interval record gymnasium envs; the PettingZoo parallel env "
                         f"{args.env} records none (--play prints each agent's episodes)")
    check = parallel_wrapper if env_type == MULTIAGENT else wrapper_class
    for spec in wrappers:
        check(spec)  # imports it: a wrong name is one line now, not a crash in a worker
    return RunConfig(args, env_type, env_id, make_id, learn, network, vec_normalize, env_kwargs, num_env,
                     wrappers, learn_kwargs, sources, vars(hp), notes)


# rl-baselines3-zoo's names of what an entry may set besides hyperparameters (``num_env``, ``vec_normalize``)
ENTRY_ALIASES = {"n_envs": ("num_env", "rl-baselines3-zoo"), "normalize": ("vec_normalize", "rl-baselines3-zoo")}


def _canonical(tab: Table, key: str) -> tuple[str, str | None]:
    """(our name of ``key``, the library whose name it is, None for ours): ``tab``'s aliases and ``ENTRY_ALIASES``."""
    if key in tab.aliases:
        return tab.aliases[key]
    return ENTRY_ALIASES.get(key, (tab.canonical(key), None))


def _map_aliases(tab: Table, source: str, entry: Mapping[str, Any]) -> list[str]:
    """A note for each of the user's names that another library gives a setting of ``tab``
    ("--learning_rate -> --lr (stable-baselines3's name)"); UsageError when ``entry`` names a setting twice."""
    notes, seen = [], {}
    for key in entry:
        name, library = _canonical(tab, key)
        if name in seen:
            both = f"--{seen[name]} and --{key}" if source == FROM_COMMAND_LINE else f"{source}: {seen[name]} and {key}"
            raise UsageError(f"{both} name the same setting ({name}); give one")
        seen[name] = key
        if library:
            said = f"--{key} -> --{name}" if source == FROM_COMMAND_LINE else f"{source}: {key} -> {name}"
            notes.append(f"note: {said} ({library}'s name)")
    return notes


def _drop_misfits(values: dict[str, Any], sources: dict[str, str], network: Any, shipped: list[str]) -> list[str]:
    """An entry's ``value_network='copy'`` under a recurrent ``--network``: a shipped entry's is dropped (the
    note says so), a ``--hyperparams`` file's is refused naming the flag that resolves it."""
    if (values.get("value_network") != "copy" or sources.get("network") != FROM_COMMAND_LINE
            or sources.get("value_network") == FROM_COMMAND_LINE or not _recurrent(network)):
        return []
    source = sources["value_network"]
    if source not in shipped:
        raise UsageError(f"{source}: value_network='copy' does not fit --network={network} (a recurrent network "
                         "has no value network of its own); add --value_network=None")
    del values["value_network"], sources["value_network"]
    return [(f"note: {source} sets value_network='copy', which does not fit --network={network} (recurrent); "
             "using value_network=None")]


def _recurrent(network: Any) -> bool:
    """Whether the registered network ``network`` is recurrent (its builder takes ``nlstm``; imports TensorFlow)."""
    from common.nn.models import get_network_builder

    try:
        return "nlstm" in inspect.signature(get_network_builder(network)).parameters
    except (ValueError, TypeError):
        return False


def _check_file_network(network: Any, source: str) -> None:
    """A ``--hyperparams`` file's network: a name for the registry, never code (``common.trust``)."""
    if not isinstance(network, str):
        raise UsageError(f"{source}: network expects a registered name such as mlp, got {network!r}")
    if names_module(network):
        require_on_command_line("network", network, None, f"--hyperparams {source} sets")


def _entry_env_kwargs(value: Any, sources: Mapping[str, str]) -> dict[str, Any]:
    """An entry's ``env_kwargs`` (a TOML table of gym.make keyword arguments), checked."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise UsageError(f"{where_of('env_kwargs', sources)}env_kwargs expects a table of gym.make keyword "
                         f"arguments, got {value!r}")
    return dict(value)


def _entry_num_env(value: Any, sources: Mapping[str, str]) -> int | None:
    """An entry's ``num_env`` (None: not set), checked."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise UsageError(f"{where_of('num_env', sources)}num_env expects an integer >= 1, got {value!r}")
    return value


def runner_num_env(alg: str, env_type: str) -> tuple[int, str] | None:
    """(num_env, its source) where no source sets num_env and ``alg`` is made for many envs (a2c: 8;
    ``algos.capabilities``); None where the runner's own choice stands (one per CPU core for atari, else 1)."""
    n = default_num_env(alg)
    return None if n == 1 or env_type in CPU_COUNT_ENV_TYPES else (n, f"runner default for {alg}")


def one_env_notes(alg: str, num_env: int | None, source: str | None, user_files: list[str]) -> list[str]:
    """The start note when the user's own choice (the command line, a ``--hyperparams`` file) gives an algorithm
    made for many envs (a2c) one env: the run goes on, the note names the setting that helps."""
    n = default_num_env(alg)
    if n == 1 or num_env != 1 or (source != FROM_COMMAND_LINE and source not in user_files):
        return []
    where = "--num_env=1" if source == FROM_COMMAND_LINE else f"num_env = 1 in {source}"
    return [(f"note: {alg} learns from nsteps x num_env samples per update, and with one env ({where}) it often "
             f"learns nothing; --num_env={n} helps")]


SELF_PLAY_ALGORITHMS = ("ppo2", "a2c", "trpo")  # their tables declare self_play (algos/selfplay)


def where_of(key: str, sources: Mapping[str, str]) -> str:
    """The prefix naming where ``key``'s value came from: "--" (command line) or "FILE [entry]: "."""
    source = sources.get(key, FROM_DEFAULTS)
    return "--" if source == FROM_COMMAND_LINE else f"{source}: "

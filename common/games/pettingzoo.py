"""PettingZoo environments (AEC, or parallel ones turned into turns) as games of ``common.games.protocol``,
so that ``--env=pettingzoo.classic:connect_four_v3`` trains one learner seat with ``SelfPlayEnv``.

PettingZoo is an optional extra (``requirements-pettingzoo.txt``); without it such an env is a one-line
``PettingZooMissing`` error saying how to install it. Observations that are dicts use their
``"observation"`` entry, and the legal moves come from their ``"action_mask"`` entry (else from
``infos[agent]["action_mask"]``, else every move is legal)."""
from __future__ import annotations

import functools
import importlib
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from common.errors import UserError
from common.games.self_play_env import SelfPlayEnv

INSTALL = "pip install -r requirements-pettingzoo.txt"
PREFIX = "pettingzoo."


class PettingZooMissing(UserError):
    """A PettingZoo env was asked for and PettingZoo is not installed, or the env does not exist."""


def _registry_id(spec: str) -> str | None:
    """PettingZoo's registry id of ``pettingzoo.<family>:<name>_v<N>`` (``classic/connect_four-v3``), or None."""
    modname, _, name = spec.partition(":")
    base, _, version = name.rpartition("_v")
    if not modname.startswith(PREFIX) or not base or not version.isdigit():
        return None
    return f"{modname[len(PREFIX):]}/{base}-v{version}"


def make_aec(spec: str, **kwargs: Any) -> Any:
    """A fresh AEC env of ``spec``, ``package.module:name`` (such as ``pettingzoo.classic:connect_four_v3``):
    from PettingZoo's registry when it has the env, else ``module.name.env()`` (or ``parallel_env()`` turned
    into turns). PettingZooMissing when PettingZoo or the env is missing."""
    modname, colon, name = spec.partition(":")
    if not colon or not name.isidentifier():
        raise PettingZooMissing(f"--env={spec}: PettingZoo envs are written package.module:name, "
                                "such as pettingzoo.classic:connect_four_v3")
    try:
        import pettingzoo
    except ImportError:
        raise PettingZooMissing(f"--env={spec} needs PettingZoo, an optional extra: {INSTALL}") from None
    registry_id = _registry_id(spec)
    if registry_id and hasattr(pettingzoo, "make"):
        from pettingzoo.env_registry.exceptions import NameNotFound

        try:
            return pettingzoo.make("aec", registry_id, **kwargs)
        except NameNotFound:
            pass
    with warnings.catch_warnings():  # PettingZoo 1.27 deprecates importing env modules for its registry
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            module = getattr(importlib.import_module(modname), name)
        except (ImportError, AttributeError) as e:
            raise PettingZooMissing(f"--env={spec}: no such PettingZoo env ({e})") from None
    if hasattr(module, "env"):
        return module.env(**kwargs)
    if hasattr(module, "parallel_env"):
        from pettingzoo.utils.conversions import parallel_to_aec

        return parallel_to_aec(module.parallel_env(**kwargs))
    raise PettingZooMissing(f"--env={spec}: {modname}.{name} has neither env() nor parallel_env()")


# PettingZoo's wrappers that only check calls (order, action bounds, illegal moves): the adapter steps and
# observes the env under them (each wrapper layer costs an attribute lookup per read) and checks moves itself.
_CHECKING_WRAPPERS = ("OrderEnforcingWrapper", "AssertOutOfBoundsWrapper", "TerminateIllegalWrapper")


def _unchecked(env: Any) -> Any:
    """``env`` without PettingZoo's checking wrappers around it (exactly those classes; any other wrapper,
    such as one that changes observations or rewards, stays, with everything under it)."""
    from pettingzoo.utils import wrappers

    checking = tuple(getattr(wrappers, name) for name in _CHECKING_WRAPPERS if hasattr(wrappers, name))
    while type(env) in checking:
        env = env.env
    return env


class AECGame:
    """A PettingZoo AEC env (or a ``ParallelEnv``, turned into turns) as a game: seat ``i`` is
    ``possible_agents[i]``; a move's rewards are ``env.rewards`` after it. Games start through all of the
    env's wrappers; moves and observations go to the env under PettingZoo's checking wrappers
    (``_unchecked``), each position observed once per agent."""

    def __init__(self, env: Any) -> None:
        from pettingzoo.utils.env import ParallelEnv

        if isinstance(env, ParallelEnv):
            from pettingzoo.utils.conversions import parallel_to_aec

            env = parallel_to_aec(env)
        self.env = env
        self.agents = list(env.possible_agents)
        self.num_players = len(self.agents)
        space = env.observation_space(self.agents[0])
        self._dict_obs = isinstance(space, gym.spaces.Dict) and "observation" in space.spaces
        inner = space["observation"] if self._dict_obs else space
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, inner.shape, np.float32)
        self.action_space = env.action_space(self.agents[0])
        self._core = _unchecked(env)
        self._seat = {agent: i for i, agent in enumerate(self.agents)}
        self._seen: dict[str, Any] = {}  # each agent's raw observation of the current position
        self._over = True

    def reset(self, seed: int | None = None) -> None:
        self.env.reset(seed=seed)  # through every wrapper, so that they know a game started
        self._seen.clear()
        self._over = False

    def current_player(self) -> int:
        return self._seat[self._core.agent_selection]

    def _raw(self, agent: str) -> Any:
        obs = self._seen.get(agent)
        if obs is None:
            obs = self._seen[agent] = self._core.observe(agent)
        return obs

    def observe(self, player: int) -> np.ndarray:
        obs = self._raw(self.agents[player])
        return np.asarray(obs["observation"] if self._dict_obs else obs, np.float32)

    def legal_moves(self) -> np.ndarray:
        agent = self._core.agent_selection
        obs = self._raw(agent) if self._dict_obs else None
        if obs is not None and "action_mask" in obs:
            return np.asarray(obs["action_mask"], bool)
        mask = self._core.infos.get(agent, {}).get("action_mask")
        return np.asarray(mask, bool) if mask is not None else np.ones(self.action_space.n, bool)

    def play(self, action: int) -> tuple[np.ndarray, bool]:
        """The mover plays ``action``; ValueError when it is not a legal move (the adapter's own check,
        standing in for PettingZoo's checking wrappers, which it steps past)."""
        legal = self.legal_moves()
        if not 0 <= int(action) < len(legal) or not legal[int(action)]:
            raise ValueError(f"illegal move {action} (legal: {np.flatnonzero(legal).tolist()})")
        env = self._core
        env.step(int(action))
        rewards = np.array([float(env.rewards.get(a, 0.0)) for a in self.agents])
        # agents that are done leave with a None move, as PettingZoo requires; the game is over when all are
        while env.agents and (env.terminations.get(env.agent_selection) or env.truncations.get(env.agent_selection)):
            if all(env.terminations.get(a) or env.truncations.get(a) for a in env.agents):
                break
            env.step(None)
            rewards += [float(env.rewards.get(a, 0.0)) for a in self.agents]
        self._seen.clear()
        self._over = not env.agents or all(env.terminations.get(a) or env.truncations.get(a) for a in env.agents)
        return rewards, self._over

    def render_text(self) -> str:
        """The position as text: the env's "ansi" rendering when it has one; else a board drawn from a
        (rows, columns, 2) observation of the mover (X: the mover's pieces, O: the opponent's)."""
        if getattr(self.env, "render_mode", None) == "ansi":
            return str(self.env.render())
        obs = self.observe(self.current_player())
        if obs.ndim == 3 and obs.shape[-1] >= 2:
            rows = ["".join("X" if c[0] else "O" if c[1] else "." for c in row) for row in obs]
            return "\n".join([*rows, "".join(str(i % 10) for i in range(obs.shape[1]))])
        return np.array2string(obs)


def make_game(spec: str, **env_kwargs: Any) -> AECGame:
    """The game of a PettingZoo env spec; ``env_kwargs`` go to the env (such as ``num_players=4``)."""
    return AECGame(make_aec(spec, **env_kwargs))


def make_env(spec: str, render_mode: str | None = None, **env_kwargs: Any) -> SelfPlayEnv:
    """The single-agent view (``SelfPlayEnv``) of the PettingZoo env ``spec`` (what ``make_env`` builds);
    ``env_kwargs`` (``--env_kwargs``) go to the PettingZoo env, as for texas_holdem_v4's ``num_players``."""
    return SelfPlayEnv(functools.partial(make_game, spec, **env_kwargs), render_mode=render_mode)


def env_name(spec: str) -> str:
    """The env's name in a spec, after checking that it loads (``run_util.get_env_type``)."""
    make_aec(spec).close()
    return spec.partition(":")[2]

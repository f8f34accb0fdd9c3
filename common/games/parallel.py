"""PettingZoo parallel envs trained with one shared policy: every agent of an env is one row of a vec env
(``common.vec_env.agent_vec_env.AgentVecEnv``); this module makes the env and lays out each agent's row.

- Observations: Box spaces (or a Dict's ``"observation"``, its ``"action_mask"`` read as the agent's mask).
  Agents of equal spaces keep the env's own space. Where agents differ (in space, or in group: the name
  before ``_<n>``, such as ``adversary_0`` and ``agent_0``), each row is the flattened observation, zero-padded
  to the largest, followed by the agent's one-hot id.
- Actions: equal spaces are kept; Discrete spaces of different sizes are padded to the largest, the extra
  moves masked (``info["action_mask"]``). Other differences are refused in one line naming what differs.
- An agent that leaves before its env's episode ends finishes its row's episode then; until the env
  restarts its row sees zeros, earns 0 and, with Discrete actions, has move 0 as its only legal move (so
  it adds nothing to a policy gradient).
"""
from __future__ import annotations

import importlib
import re
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from common.errors import UserError

INSTALL = "pip install -r requirements-pettingzoo.txt"
ENV_TYPE = "multiagent"


class AgentSpacesError(UserError):
    """The agents of a parallel env differ in a way one shared policy cannot take, or the env is missing."""


def _env_module(spec: str) -> Any:
    """The object named by ``module:name`` (such as ``mpe2:simple_spread_v3``), or None when it does not import."""
    modname, _, name = spec.partition(":")
    if not modname or not name.isidentifier():
        return None
    with warnings.catch_warnings():  # PettingZoo 1.27 deprecates importing env modules for its registry
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            module = importlib.import_module(modname)
            if not hasattr(module, name) and hasattr(module, "__path__"):  # a submodule (mpe2.simple_spread_v3)
                importlib.import_module(f"{modname}.{name}")
            return getattr(module, name, None)
        except ImportError:
            return None


def is_parallel_spec(spec: str) -> bool:
    """Whether ``module:name`` names a PettingZoo parallel env (an env module with ``parallel_env()``)."""
    return ":" in spec and callable(getattr(_env_module(spec), "parallel_env", None))


# (spec, its kwargs) -> whether its image observations need render_mode="rgb_array" (see make_parallel)
_DRAWS_OBSERVATIONS: dict[tuple[str, str], bool] = {}


def _is_image(space: gym.Space) -> bool:
    """Whether an observation space is an image: a Box of 2 or more dimensions."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) > 1


def _observes_drawn_images(env: Any) -> bool:
    """Whether every agent of ``env`` observes an image and the env can render to an array: PettingZoo's pygame
    envs cut such observations from the screen they draw."""
    spaces = [_inner_obs_space(env.observation_space(a)) for a in env.possible_agents]
    modes = (getattr(env, "metadata", None) or {}).get("render_modes", ())
    return "rgb_array" in modes and all(_is_image(s) for s in spaces)


def make_parallel(spec: str, **kwargs: Any) -> Any:
    """A fresh PettingZoo ``ParallelEnv`` of ``spec`` (``module:name``): ``module.name.parallel_env(**kwargs)``.

    Envs whose agents observe images are made with ``render_mode="rgb_array"`` unless ``kwargs`` names a render
    mode: PettingZoo's pygame envs (pistonball, cooperative pong) draw the screen their observations are cut
    from only when made with a render mode, so without one every observation would show the first frame."""
    module = _env_module(spec)
    if not callable(getattr(module, "parallel_env", None)):
        raise AgentSpacesError(f"--env={spec}: no PettingZoo parallel env there (needs PettingZoo: {INSTALL})")
    if "render_mode" not in kwargs:
        key = (spec, repr(sorted(kwargs.items())))
        if key not in _DRAWS_OBSERVATIONS:
            env = module.parallel_env(**kwargs)
            _DRAWS_OBSERVATIONS[key] = _observes_drawn_images(env)
            if not _DRAWS_OBSERVATIONS[key]:
                return env
            env.close()
        if _DRAWS_OBSERVATIONS[key]:
            kwargs = {**kwargs, "render_mode": "rgb_array"}
    return module.parallel_env(**kwargs)


def env_name(spec: str) -> str:
    """The env's name in a spec, after checking that it builds (``run_util.get_env_type``)."""
    make_parallel(spec).close()
    return spec.partition(":")[2]


def agent_group(agent: str) -> str:
    """An agent's group: its name without a trailing ``_<n>`` (``adversary_0`` -> ``adversary``)."""
    return re.sub(r"_\d+$", "", agent)


def _inner_obs_space(space: gym.Space) -> gym.Space:
    if isinstance(space, gym.spaces.Dict) and "observation" in space.spaces:
        return space["observation"]
    return space


def _describe(items: dict[str, Any]) -> str:
    return ", ".join(f"{a}: {s}" for a, s in items.items())


class AgentLayout:
    """How each agent of a parallel env becomes one row: the shared observation and action spaces, the
    padding and one-hot ids, and the action masks (see the module docstring)."""

    def __init__(self, env: Any, spec: str = "the env") -> None:
        self.agents = list(env.possible_agents)
        self.index = {a: i for i, a in enumerate(self.agents)}
        self.groups = [agent_group(a) for a in self.agents]
        raw_obs = {a: env.observation_space(a) for a in self.agents}
        self._dict_obs = {a: _inner_obs_space(s) is not s for a, s in raw_obs.items()}
        obs = {a: _inner_obs_space(s) for a, s in raw_obs.items()}
        acts = {a: env.action_space(a) for a in self.agents}
        if not all(isinstance(s, gym.spaces.Box) for s in obs.values()):
            raise AgentSpacesError(f"{spec}: observations must be Box spaces for one shared policy; "
                                   f"they are {_describe(obs)}")
        first = obs[self.agents[0]]
        same_obs = all(s.shape == first.shape and s.dtype == first.dtype for s in obs.values())
        self.action_space, self._action_sizes = self._shared_actions(acts, spec)
        self.one_hot = len(set(self.groups)) > 1 or not same_obs or self._action_sizes is not None
        if same_obs and not self.one_hot:
            self.observation_space: gym.Space = first
            self._width = None
        else:
            images = {a: s.shape for a, s in obs.items() if _is_image(s)}
            if images:
                raise AgentSpacesError(f"{spec}: the agents differ ({'spaces' if not same_obs else 'groups'}), "
                                       f"and observations of more than one dimension cannot be padded or given "
                                       f"an agent id: {_describe(images)}")
            self._width = max(int(np.prod(s.shape)) for s in obs.values())
            size = self._width + len(self.agents)
            self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.masked = isinstance(self.action_space, gym.spaces.Discrete)

    @staticmethod
    def _shared_actions(acts: dict[str, gym.Space], spec: str) -> tuple[gym.Space, list[int] | None]:
        """The one action space of every row, and each agent's Discrete size when they differ (else None)."""
        spaces = list(acts.values())
        if all(s == spaces[0] for s in spaces):
            return spaces[0], None
        if all(isinstance(s, gym.spaces.Discrete) and int(s.start) == 0 for s in spaces):
            sizes = [int(s.n) for s in spaces]
            return gym.spaces.Discrete(max(sizes)), sizes
        raise AgentSpacesError(f"{spec}: the agents' action spaces differ and only Discrete ones can be padded: "
                               f"{_describe(acts)}")

    def row(self, agent: str, obs: Any) -> np.ndarray:
        """The row of ``agent``'s observation ``obs``."""
        if self._dict_obs[agent]:
            obs = obs["observation"]
        if self._width is None:
            return np.asarray(obs, self.observation_space.dtype)
        out = np.zeros(self.observation_space.shape, np.float32)
        flat = np.asarray(obs, np.float32).ravel()
        out[:flat.size] = flat
        out[self._width + self.index[agent]] = 1.0
        return out

    def dead_row(self, agent: str) -> np.ndarray:
        """The row of an agent that has left: zeros (and its one-hot id)."""
        out = np.zeros(self.observation_space.shape, self.observation_space.dtype)
        if self._width is not None:
            out[self._width + self.index[agent]] = 1
        return out

    def mask(self, agent: str | None, obs: Any = None, info: dict | None = None) -> np.ndarray | None:
        """The legal moves of ``agent`` (None: an agent that has left, move 0 only), or None without masks."""
        if not self.masked:
            return None
        n = int(self.action_space.n)
        out = np.zeros(n, bool)
        if agent is None:
            out[0] = True
            return out
        own = obs.get("action_mask") if self._dict_obs[agent] else (info or {}).get("action_mask")
        size = n if self._action_sizes is None else self._action_sizes[self.index[agent]]
        out[:size] = True if own is None else np.asarray(own, bool)[:size]
        return out

    def action(self, agent: str, action: Any) -> Any:
        """The env's action from a row's action (Discrete: a plain int)."""
        return int(action) if self.masked else np.asarray(action)


class AgentRows:
    """One parallel env as ``len(layout.agents)`` rows: reset and step in rows, each agent's return and
    length, the agents still in the episode, and the env's state for checkpoints when it has one."""

    def __init__(self, env: Any, layout: AgentLayout, reward_scale: float = 1.0) -> None:
        self.env, self.layout, self.reward_scale = env, layout, float(reward_scale)
        n = len(layout.agents)
        self.returns = np.zeros(n)
        self.lengths = np.zeros(n, np.int64)
        self.alive = np.zeros(n, bool)

    def _rows(self, obs: dict, infos: dict) -> tuple[list[np.ndarray], list[dict]]:
        rows, row_infos = [], []
        for i, agent in enumerate(self.layout.agents):
            if self.alive[i] and agent in obs:
                rows.append(self.layout.row(agent, obs[agent]))
                mask = self.layout.mask(agent, obs[agent], infos.get(agent))
            else:
                rows.append(self.layout.dead_row(agent))
                mask = self.layout.mask(None)
            info = dict(infos.get(agent, {})) if self.alive[i] else {}
            if mask is not None:
                info["action_mask"] = mask
            row_infos.append(info)
        return rows, row_infos

    def reset(self, seed: int | None = None) -> tuple[list[np.ndarray], list[dict]]:
        """Start an episode; each agent's row and reset info."""
        obs, infos = self.env.reset(seed=seed)
        self.returns[:] = 0.0
        self.lengths[:] = 0
        self.alive[:] = [a in self.env.agents for a in self.layout.agents]
        return self._rows(obs, infos or {})

    def step(self, actions: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, list[dict], list[dict]]:
        """One step of every agent still in the episode (rows of agents that left are ignored); restarts the
        env when no agent is left. Returns rows, rewards (scaled by ``reward_scale``; episode returns are
        not), dones, infos and the reset infos of the rows that are done (their next observation's)."""
        layout = self.layout
        acting = {a: layout.action(a, actions[i]) for i, a in enumerate(layout.agents) if self.alive[i]}
        obs, rewards, terms, truncs, infos = self.env.step(acting)
        n = len(layout.agents)
        rew, dones = np.zeros(n, np.float32), np.zeros(n, bool)
        leaving: list[tuple[int, bool]] = []
        for i, agent in enumerate(layout.agents):
            if not self.alive[i]:
                continue
            r = float(rewards.get(agent, 0.0))
            rew[i] = r * self.reward_scale
            self.returns[i] += r
            self.lengths[i] += 1
            term, trunc = bool(terms.get(agent, False)), bool(truncs.get(agent, False))
            if term or trunc or agent not in self.env.agents:
                leaving.append((i, trunc and not term))
        rows, row_infos = self._rows(obs, infos)
        reset_infos: list[dict] = [{} for _ in range(n)]
        for i, truncated in leaving:
            dones[i], self.alive[i] = True, False
            row_infos[i].update({"terminal_observation": rows[i], "TimeLimit.truncated": truncated,
                                 "episode": {"r": float(self.returns[i]), "l": int(self.lengths[i]),
                                             "group": layout.groups[i]}})
            rows[i] = layout.dead_row(layout.agents[i])
            if layout.masked:
                reset_infos[i]["action_mask"] = layout.mask(None)
        if not self.alive.any():  # the episode is over: the team's return goes with its first row
            first = int(leaving[0][0]) if leaving else 0
            row_infos[first].setdefault("episode", {"r": 0.0, "l": 0, "group": layout.groups[first]})
            row_infos[first]["episode"]["team"] = float(self.returns.sum())
            dones[:] = True
            rows, reset_infos = self.reset()
        return rows, rew, dones, row_infos, reset_infos

    def get_state(self) -> dict[str, Any] | None:
        """The env's state and the rows' (the env's own ``get_state``), or None when the env has none."""
        get = getattr(self.env, "get_state", None)
        if get is None:
            return None
        return {"env": get(), "returns": self.returns.copy(), "lengths": self.lengths.copy(),
                "alive": self.alive.copy()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what ``get_state`` returned."""
        self.env.set_state(state["env"])
        self.returns[:] = state["returns"]
        self.lengths[:] = state["lengths"]
        self.alive[:] = state["alive"]

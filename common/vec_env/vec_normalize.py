"""VecNormalize: observations scaled by running mean/std, rewards by the std of the discounted return."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from common.running_mean_std import RunningMeanStd
from common.vec_env.base import VecEnv, VecEnvWrapper, VecObs, VecStepReturn

_CONFIG = ("clip_obs", "clip_reward", "gamma", "epsilon")


class VecNormalize(VecEnvWrapper):
    """Normalises observations and rewards with running statistics.

    Args:
        venv: the vec env (Box observations, or a Dict of Box parts).
        training: update the statistics on every step (set False to evaluate a trained model).
        norm_obs: normalise observations.
        norm_reward: divide rewards by the std of the discounted return.
        clip_obs: observations are clipped to [-clip_obs, clip_obs] after normalising.
        clip_reward: rewards are clipped to [-clip_reward, clip_reward] after normalising.
        gamma: discount of the return whose std scales rewards.
        epsilon: added to variances before the square root.
    """

    def __init__(self, venv: VecEnv, training: bool = True, norm_obs: bool = True, norm_reward: bool = True,
                 clip_obs: float = 10.0, clip_reward: float = 10.0, gamma: float = 0.99,
                 epsilon: float = 1e-8) -> None:
        super().__init__(venv)
        self.training, self.norm_obs, self.norm_reward = training, norm_obs, norm_reward
        self.clip_obs, self.clip_reward, self.gamma, self.epsilon = clip_obs, clip_reward, gamma, epsilon
        space = venv.observation_space
        if norm_obs:
            parts = space.spaces if isinstance(space, spaces.Dict) else {None: space}
            for key, sub in parts.items():
                if not isinstance(sub, spaces.Box):
                    where = "" if key is None else f" (key {key!r})"
                    raise TypeError(f"VecNormalize(norm_obs=True) needs Box observations, got {sub}{where}; "
                                    "pass norm_obs=False")
            if isinstance(space, spaces.Dict):
                self.obs_rms: Any = {k: RunningMeanStd(shape=s.shape) for k, s in space.spaces.items()}
            else:
                self.obs_rms = RunningMeanStd(shape=space.shape)
        else:
            self.obs_rms = None
        self.ret_rms = RunningMeanStd(shape=())
        self.returns = np.zeros(self.num_envs, dtype=np.float64)
        self._old_obs: VecObs | None = None
        self._old_rews: np.ndarray | None = None

    # --- statistics ------------------------------------------------------------------------------
    def _rms_items(self) -> list[tuple[str, RunningMeanStd]]:
        items = [("ret", self.ret_rms)]
        if isinstance(self.obs_rms, dict):
            items += [(f"obs/{k}", r) for k, r in self.obs_rms.items()]
        elif self.obs_rms is not None:
            items.append(("obs", self.obs_rms))
        return items

    def get_state(self) -> dict[str, np.ndarray]:
        """Statistics and settings as plain float64 arrays (JSON/npz friendly)."""
        state = {}
        for name, rms in self._rms_items():
            state[f"{name}_mean"] = np.array(rms.mean, dtype=np.float64)
            state[f"{name}_var"] = np.array(rms.var, dtype=np.float64)
            state[f"{name}_count"] = np.array(rms.count, dtype=np.float64)
        for name in _CONFIG:
            state[name] = np.array(getattr(self, name), dtype=np.float64)
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what ``get_state`` returned (e.g. from a saved model)."""
        for name, rms in self._rms_items():
            try:
                mean = np.asarray(state[f"{name}_mean"], dtype=np.float64)
                var = np.asarray(state[f"{name}_var"], dtype=np.float64)
                count = float(np.asarray(state[f"{name}_count"]))
            except KeyError as e:
                raise ValueError(f"VecNormalize state lacks {e.args[0]!r}; it holds {sorted(state)}") from None
            if mean.shape != rms.mean.shape or var.shape != rms.var.shape:
                raise ValueError(f"VecNormalize state for {name!r} has shape {mean.shape}, "
                                 f"this env needs {rms.mean.shape}")
            rms.mean, rms.var, rms.count = mean.copy(), var.copy(), count
        for name in _CONFIG:
            if name in state:
                setattr(self, name, float(np.asarray(state[name])))

    # --- normalisation ---------------------------------------------------------------------------
    def _norm(self, x: np.ndarray, rms: RunningMeanStd) -> np.ndarray:
        out = (x - rms.mean) / np.sqrt(rms.var + self.epsilon)
        return np.minimum(np.maximum(out, -self.clip_obs), self.clip_obs).astype(np.float32)  # np.clip's result

    def normalize_obs(self, obs: VecObs) -> VecObs:
        """Normalised copy of ``obs`` (unchanged when norm_obs is False)."""
        if self.obs_rms is None:
            return obs
        if isinstance(self.obs_rms, dict):
            return {k: self._norm(obs[k], self.obs_rms[k]) if k in self.obs_rms else obs[k] for k in obs}
        return self._norm(obs, self.obs_rms)

    def normalize_reward(self, rews: np.ndarray) -> np.ndarray:
        """Rewards divided by the std of the discounted return, clipped."""
        if not self.norm_reward:
            return rews
        out = np.minimum(np.maximum(rews / np.sqrt(self.ret_rms.var + self.epsilon), -self.clip_reward),
                         self.clip_reward)  # np.clip's result, minus its overhead
        return out.astype(np.float32)

    def _update_obs_rms(self, obs: VecObs) -> None:
        if isinstance(self.obs_rms, dict):
            for k, rms in self.obs_rms.items():
                rms.update(obs[k])
        elif self.obs_rms is not None:
            rms = self.obs_rms
            rms.update(obs)

    def get_original_obs(self) -> VecObs | None:
        """The last observation before normalisation."""
        return self._old_obs

    def get_original_reward(self) -> np.ndarray | None:
        """The last rewards before normalisation."""
        return self._old_rews

    # --- stepping ----------------------------------------------------------------------------------
    def reset(self) -> VecObs:
        obs = self.venv.reset()
        self._old_obs = obs
        self.returns[:] = 0
        if self.training:
            self._update_obs_rms(obs)
        return self.normalize_obs(obs)

    def step_wait(self) -> VecStepReturn:
        obs, rews, dones, infos = self.venv.step_wait()
        self._old_obs, self._old_rews = obs, rews
        if self.training:
            self._update_obs_rms(obs)
            self.returns = self.returns * self.gamma + rews
            self.ret_rms.update(self.returns)
        if dones.any():
            for i in np.flatnonzero(dones):
                if "terminal_observation" in infos[i] and self.obs_rms is not None:
                    term = infos[i]["terminal_observation"]
                    batch = {k: v[None] for k, v in term.items()} if isinstance(term, dict) else np.asarray(term)[None]
                    normed = self.normalize_obs(batch)
                    infos[i]["terminal_observation"] = ({k: v[0] for k, v in normed.items()}
                                                        if isinstance(normed, dict) else normed[0])
            self.returns[dones] = 0
        return self.normalize_obs(obs), self.normalize_reward(rews), dones, infos


def unwrap_vec_normalize(venv: VecEnv) -> Any:
    """The first VecNormalize along the wrapper chain of ``venv``, or None."""
    current: Any = venv
    while isinstance(current, VecEnv):
        if isinstance(current, VecNormalize):
            return current
        current = getattr(current, "venv", None) if isinstance(current, VecEnvWrapper) else None
    return None

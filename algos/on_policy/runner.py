"""Rollout collection for the on-policy algorithms: acts in numpy (or one TF call per step), stores, bootstraps truncations."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from common.buffers.rollout import RolloutStorage, bootstrap_truncated
from common.nn.distributions import to_env_actions
from common.nn.policies import ActorCritic
from common.nn.sde import ExplorationMatrices
from common.wrappers.action_mask import VecActionMasks, masked_logits

if TYPE_CHECKING:
    from algos.training import EpisodeStats
    from common.vec_env.base import VecObs


class Runner:
    """Collects ``nsteps`` steps from every env of ``env`` with ``policy``; when the env gives action masks
    (``common.wrappers.action_mask``), the policy's logits are masked and the masks stored with the rollout.
    A gSDE policy (``policy.use_sde``) explores with per-env noise matrices (``common.nn.sde``) drawn at the
    start of each rollout and every ``sde_sample_freq`` steps when that is > 0.

    Args:
        env: the VecEnv (already reset by the caller: ``obs`` is its first observation batch).
        policy: the actor-critic.
        nsteps, gamma, lam: rollout length and GAE parameters.
        rng: numpy Generator used to sample actions.
        episodes: where finished episodes are recorded.
        sde_sample_freq: env steps between new gSDE noise matrices (<= 0: one per rollout).
        bootstrap_truncations: at a time-limit truncation add ``gamma * V(final observation)`` to the reward
            (True), or end the return there as at a termination (False).
    """

    def __init__(self, env, policy: ActorCritic, obs, nsteps: int, gamma: float, lam: float, rng: np.random.Generator,
                 episodes: EpisodeStats, sde_sample_freq: int = -1, bootstrap_truncations: bool = True):
        self.env, self.policy = env, policy
        self.nenvs, self.nsteps, self.gamma, self.lam = env.num_envs, int(nsteps), float(gamma), float(lam)
        self.rng = rng
        enc, pd = policy.encoder, policy.pdtype
        self.masks = VecActionMasks.of(env)  # None unless the env gives action masks
        self.storage = RolloutStorage(self.nsteps, self.nenvs, enc.shape, enc.dtype, pd.action_shape,
                                      pd.action_dtype, policy.state_size,
                                      mask_size=0 if self.masks is None else pd.param_size)
        self.obs = enc(obs)
        self.rnn_state = policy.initial_state(self.nenvs)
        self.starts = np.ones(self.nenvs, np.float32)
        self.episodes = episodes
        self.bootstrap_truncations = bool(bootstrap_truncations)
        self.sde = (ExplorationMatrices(self.nenvs, policy.net.output_dim, pd.size, sde_sample_freq)
                    if policy.use_sde else None)

    def state(self) -> dict:
        """What the next rollout starts from, for checkpoints: observations, recurrent state, episode
        starts and the sampling generator."""
        masks = {} if self.masks is None else {"masks": self.masks.state()}
        sde = {} if self.sde is None else {"sde": self.sde.state()}
        return {"obs": self.obs, "state": self.rnn_state, "starts": self.starts, "rng": self.rng.bit_generator.state,
                **masks, **sde}

    def load_state(self, state: dict) -> None:
        """Restore what ``state`` returned."""
        self.obs, self.starts = np.array(state["obs"]), np.array(state["starts"])
        self.rnn_state = None if state["state"] is None else np.array(state["state"])
        self.rng.bit_generator.state = state["rng"]
        if self.masks is not None:
            self.masks.load_state(state["masks"])
        if self.sde is not None:
            self.sde.load_state(state["sde"])

    def restart_episodes(self, obs: VecObs) -> None:
        """The envs were reset (a resumed run whose envs could not be restored): start from ``obs``."""
        self.obs = self.policy.encoder(obs)
        self.rnn_state = self.policy.initial_state(self.nenvs)
        self.starts = np.ones(self.nenvs, np.float32)
        if self.masks is not None:
            self.masks.restart()

    def run(self) -> None:
        """One rollout; fills ``self.storage`` (with advantages and returns) and records finished episodes."""
        st, policy, env = self.storage, self.policy, self.env
        pd, enc, space = policy.pdtype, policy.encoder, env.action_space
        if st.states0 is not None:
            st.states0[:] = self.rnn_state
        obs, state, starts, masks, sde = self.obs, self.rnn_state, self.starts, self.masks, self.sde
        if sde is not None:
            sde_std = policy.exploration_std()
            sde.reset(sde_std, self.rng)
        for t in range(self.nsteps):
            if sde is None:
                params, values, next_state = policy.step(obs, state, starts)
                if masks is not None:  # masked logits: never sampled, and their probabilities are 0 in neglogp
                    st.masks[t] = masks.current
                    params = masked_logits(params, masks.current)
                actions, neglogps = pd.np_sample_neglogp(params, self.rng)
            else:  # the mean plus the state-dependent noise; its neglogp under the state-dependent Gaussian
                params, values, next_state, latent = policy.step_latent(obs, state, starts)
                actions = pd.np_mode(params) + sde.noise(latent, sde_std, self.rng).reshape(-1, *pd.action_shape)
                neglogps = pd.np_neglogp(params, actions)
            st.obs[t] = obs
            st.actions[t] = actions
            st.values[t] = values
            st.neglogps[t] = neglogps
            st.episode_starts[t] = starts
            raw_obs, rewards, dones, infos = env.step(to_env_actions(actions, space))
            if masks is not None:
                masks.update(infos, dones)
            if dones.any():
                rewards = np.array(rewards, np.float32)
                self.episodes.add(infos, dones)
                if self.bootstrap_truncations:
                    bootstrap_truncated(rewards, dones, infos, self._terminal_values(next_state), self.gamma)
            st.rewards[t] = rewards
            st.dones[t] = dones
            obs, state, starts = enc(raw_obs), next_state, dones.astype(np.float32)
        self.obs, self.rnn_state, self.starts = obs, state, starts
        last_values = policy.value(obs, state, starts)
        st.compute_returns(last_values, self.gamma, self.lam)

    def _terminal_values(self, next_state):
        policy = self.policy

        def value_fn(terminal_obs: list, idx: np.ndarray) -> np.ndarray:
            x = policy.encoder.encode_list(terminal_obs)
            if policy.recurrent:  # the state that would have processed the terminal observation
                return policy.value(x, next_state[idx], np.zeros(len(idx), np.float32))
            return policy.value(x)

        return value_fn

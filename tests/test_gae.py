import numpy as np
import pytest

from common.buffers.rollout import RolloutStorage, bootstrap_truncated, compute_gae
from common.math_util import explained_variance


def test_gae_by_hand_with_terminated_and_truncated_episodes():
    gamma, lam = 0.9, 0.5
    # one env, 4 steps: episode terminates after step 1; a new one runs steps 2-3 (not done at the end)
    rewards = np.array([[1.0], [2.0], [0.5], [1.0]], np.float32)
    values = np.array([[0.5], [1.0], [2.0], [3.0]], np.float32)
    dones = np.array([[False], [True], [False], [False]])
    last = np.array([4.0], np.float32)
    advs, rets = compute_gae(rewards, values, dones, last, gamma, lam)
    d3 = 1.0 + 0.9 * 4.0 - 3.0            # 1.6
    d2 = 0.5 + 0.9 * 3.0 - 2.0            # 1.2
    d1 = 2.0 - 1.0                        # terminated: no bootstrap -> 1.0
    d0 = 1.0 + 0.9 * 1.0 - 0.5            # 1.4
    a3 = d3
    a2 = d2 + 0.45 * a3
    a1 = d1
    a0 = d0 + 0.45 * a1
    np.testing.assert_allclose(advs[:, 0], [a0, a1, a2, a3], rtol=1e-6)
    np.testing.assert_allclose(rets, advs + values, rtol=1e-6)


def test_truncation_bootstraps_from_terminal_observation_value_only():
    gamma = 0.9
    rewards = np.array([1.0, 1.0, 1.0], np.float32)
    dones = np.array([True, True, False])
    infos = [
        {"TimeLimit.truncated": True, "terminal_observation": np.array([7.0])},
        {"TimeLimit.truncated": False, "terminal_observation": np.array([9.0])},
        {},
    ]
    calls = []

    def value_fn(obs_list, idx):
        calls.append(list(idx))
        return np.array([o[0] * 10 for o in obs_list])

    idx = bootstrap_truncated(rewards, dones, infos, value_fn, gamma)
    assert list(idx) == [0] and calls == [[0]]
    np.testing.assert_allclose(rewards, [1.0 + 0.9 * 70.0, 1.0, 1.0])
    # the truncated step then ends the episode for GAE: advantage = r + gamma V(term) - V
    advs, _ = compute_gae(rewards[None], np.array([[5.0, 5.0, 5.0]], np.float32), dones[None],
                          np.array([100.0, 100.0, 100.0], np.float32), gamma, 0.95)
    np.testing.assert_allclose(advs[0], [1.0 + 63.0 - 5.0, 1.0 - 5.0, 1.0 + 90.0 - 5.0], rtol=1e-6)


def test_storage_flat_and_explained_variance():
    st = RolloutStorage(3, 2, (4,), np.float32, (), np.int64)
    st.obs[1, 0] = 1.0
    assert st.flat("obs").shape == (6, 4) and st.flat("obs")[2, 0] == 1.0
    st.rewards[:] = 1.0
    st.compute_returns(np.zeros(2, np.float32), 1.0, 1.0)
    np.testing.assert_allclose(st.returns[:, 0], [3.0, 2.0, 1.0])
    y = np.array([1.0, 2.0, 3.0])
    assert explained_variance(y, y) == pytest.approx(1.0)
    assert explained_variance(np.zeros(3), y) == pytest.approx(0.0)


def test_the_rollout_bootstraps_time_limits_only_when_asked(monitored_venv, monkeypatch):
    """Pendulum-v1 ends by its 200-step limit only: with ``bootstrap_truncations`` the stored reward of step 199
    is the env's plus gamma * V(final observation); without it, the env's reward (the return ends there)."""
    from algos.on_policy import runner as runner_module
    from algos.ppo2.model import PPO2Model
    from algos.training import EpisodeStats

    added = []

    def spy(rewards, dones, infos, value_fn, gamma):
        before = rewards.copy()
        idx = bootstrap_truncated(rewards, dones, infos, value_fn, gamma)
        added.append((idx, rewards - before))
        return idx

    monkeypatch.setattr(runner_module, "bootstrap_truncated", spy)
    stored = {}
    for flag in (True, False):
        env = monitored_venv("Pendulum-v1", 1, seed=0)
        model = PPO2Model(env.observation_space, env.action_space, network_kwargs={"num_hidden": 8}, seed=0)
        runner = runner_module.Runner(env, model.policy, env.reset(), 200, 0.9, 0.95, np.random.default_rng(0),
                                      EpisodeStats(), bootstrap_truncations=flag)
        runner.run()
        stored[flag] = runner.storage.rewards[:, 0].copy()
        assert runner.storage.dones[199, 0] and not runner.storage.dones[:199].any()
        env.close()
    (idx, extra), = added  # the spy ran once: in the rollout that bootstraps, at its last step
    assert list(idx) == [0] and extra[0] != 0.0
    np.testing.assert_array_equal(stored[True][:199], stored[False][:199])
    np.testing.assert_allclose(stored[True][199], stored[False][199] + extra[0], rtol=1e-6)
    assert -16.3 <= stored[False][199] <= 0.0  # Pendulum's own reward range: nothing added

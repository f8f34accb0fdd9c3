"""VecNormalize, VecMonitor, VecFrameStack and unwrap_vec_normalize."""

import json

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401
from common.vec_env import (
    DummyVecEnv,
    VecFrameStack,
    VecMonitor,
    VecNormalize,
    unwrap_vec_normalize,
)
from common.wrappers.monitor import load_results


def cartpole(n=2, steps=None):
    kw = {} if steps is None else {"max_episode_steps": steps}
    return DummyVecEnv([lambda: gym.make("CartPole-v1", **kw) for _ in range(n)])


def test_vec_normalize_statistics_and_scaling():
    venv = VecNormalize(cartpole(4), gamma=0.9)
    venv.seed(0)
    obs = venv.reset()
    raw = [venv.get_original_obs()]
    rng = np.random.default_rng(0)
    returns = np.zeros(4)
    ret_hist = []
    for _ in range(300):
        obs, rews, dones, _ = venv.step(rng.integers(0, 2, 4))
        raw.append(venv.get_original_obs())
        returns = returns * 0.9 + venv.get_original_reward()
        ret_hist.append(returns.copy())
        returns[dones] = 0
        assert rews.dtype == np.float32 and obs.dtype == np.float32
        assert np.all(np.abs(obs) <= 10.0)
    raw = np.concatenate(raw)
    np.testing.assert_allclose(venv.obs_rms.mean, raw.mean(0), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(venv.obs_rms.var, raw.var(0), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(venv.ret_rms.var, np.concatenate(ret_hist).var(), rtol=1e-3)
    expected = np.clip((venv.get_original_obs() - venv.obs_rms.mean) / np.sqrt(venv.obs_rms.var + 1e-8), -10, 10)
    np.testing.assert_allclose(obs, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rews, venv.get_original_reward() / np.sqrt(venv.ret_rms.var + 1e-8), rtol=1e-5)


def test_vec_normalize_state_roundtrip_and_eval_mode():
    train = VecNormalize(cartpole(2))
    train.reset()
    for _ in range(50):
        train.step([0, 1])
    state = train.get_state()
    assert all(isinstance(v, np.ndarray) and v.dtype == np.float64 for v in state.values())
    json.dumps({k: v.tolist() for k, v in state.items()})  # JSON friendly
    evaluate = VecNormalize(cartpole(2), training=False)
    evaluate.set_state(state)
    before = evaluate.get_state()
    evaluate.reset()
    for _ in range(20):
        evaluate.step([1, 0])
    for k, v in evaluate.get_state().items():
        np.testing.assert_array_equal(v, before[k])  # training=False: frozen
        np.testing.assert_array_equal(v, state[k])
    bad = dict(state, obs_mean=np.zeros(3))
    with pytest.raises(ValueError, match="shape"):
        evaluate.set_state(bad)
    assert unwrap_vec_normalize(VecMonitor(evaluate)) is evaluate
    assert unwrap_vec_normalize(cartpole(1)) is None


def test_vec_normalize_dict_obs_and_terminal_obs():
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("IdentityBox-v0", max_episode_steps=3)] * 2))
    venv.reset()
    for _ in range(3):
        _, _, dones, infos = venv.step(np.zeros((2, 2)))
    assert dones.all()
    term = infos[0]["terminal_observation"]
    assert term.dtype == np.float32 and np.all(np.abs(term) <= 10)
    with pytest.raises(TypeError, match="norm_obs=False"):
        VecNormalize(DummyVecEnv([lambda: gym.make("DictObs-v0")]))
    VecNormalize(DummyVecEnv([lambda: gym.make("DictObs-v0")]), norm_obs=False).reset()


def test_vec_monitor_episode_info_and_file(tmp_path):
    venv = VecMonitor(cartpole(2), filename=str(tmp_path / "vm"))
    venv.seed(1)
    venv.reset()
    lengths = np.zeros(2, int)
    eps = []
    for _ in range(100):
        _, _, dones, infos = venv.step([0, 0])
        lengths += 1
        for i in np.flatnonzero(dones):
            assert infos[i]["episode"]["l"] == lengths[i]
            assert infos[i]["episode"]["r"] == pytest.approx(lengths[i])
            eps.append(lengths[i])
            lengths[i] = 0
    venv.close()
    assert len(eps) >= 4
    res = load_results(str(tmp_path))
    assert sorted(res["l"].tolist()) == sorted(eps)


def test_frame_stack_shapes_and_reset_on_done():
    venv = VecFrameStack(DummyVecEnv([lambda: gym.make("IdentityBox-v0", max_episode_steps=3)] * 2), n_stack=3)
    assert venv.observation_space.shape == (6,)
    obs = venv.reset()
    assert np.all(obs[:, :4] == 0) and np.any(obs[:, 4:] != 0)
    o1, *_ = venv.step(np.zeros((2, 2)))
    np.testing.assert_array_equal(o1[:, 2:4], obs[:, 4:])  # frames shift left
    venv.step(np.zeros((2, 2)))
    o3, _, dones, infos = venv.step(np.zeros((2, 2)))
    assert dones.all()
    assert infos[0]["terminal_observation"].shape == (6,)
    assert np.all(o3[:, :4] == 0)  # new episode: history cleared
    with pytest.raises(TypeError, match="Box"):
        VecFrameStack(DummyVecEnv([lambda: gym.make("DictObs-v0")]), 2)


def test_vec_frame_stack_matches_shifting_the_whole_stack():
    """The ring of frames gives the stacks (and terminal observations) of shifting a stack by one frame."""
    n_env, n_stack = 3, 4
    lengths = [2, 5, 7]  # episodes end at different steps, some before the stack is full
    venv = VecFrameStack(DummyVecEnv([lambda k=k: gym.make("IdentityBox-v0", max_episode_steps=k) for k in lengths]),
                         n_stack)
    venv.seed(0)
    c = 2
    expected = np.zeros((n_env, c * n_stack), np.float32)

    def push(frame):
        expected[:] = np.roll(expected, -c, axis=-1)
        expected[:, -c:] = frame

    obs = venv.reset()
    push(obs[:, -c:])
    np.testing.assert_array_equal(obs, expected)
    rng = np.random.default_rng(0)
    for _ in range(30):
        obs, _, dones, infos = venv.step(rng.uniform(-1, 1, (n_env, c)).astype(np.float32))
        for i in np.flatnonzero(dones):
            terminal = np.concatenate([expected[i, c:], infos[i]["terminal_observation"][-c:]])
            np.testing.assert_array_equal(infos[i]["terminal_observation"], terminal)
            expected[i] = 0
        push(obs[:, -c:])
        np.testing.assert_array_equal(obs, expected)

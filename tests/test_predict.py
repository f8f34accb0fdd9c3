"""``Model.predict`` takes one observation or a batch and answers in kind: recurrent state and action
masks of one env, and the documented use from a script (load a file, act on ``env.reset()``'s observation).
The contract test (tests/test_algorithm_contract.py) covers every algorithm's single observations."""
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np

import envs  # noqa: F401 - registers MaskedBandit-v0
from algos.deepq.model import DQNModel
from algos.ppo2.model import PPO2Model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_recurrent_state_of_one_env_follows_the_batch():
    """An lstm policy stepped on one observation at a time gives the actions and states of the batch."""
    env = gym.make("CartPole-v1")
    model = PPO2Model(env.observation_space, env.action_space, network="lstm", network_kwargs={"nlstm": 8}, seed=0)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(5, 2, 4)).astype(np.float32)  # 5 steps of 2 envs
    starts = np.array([[True, True], [False, False], [False, True], [False, False], [True, False]])
    state, one_state = None, None
    for t in range(5):
        actions, state = model.predict(obs[t], state=state, episode_start=starts[t], deterministic=False,
                                       rng=np.random.default_rng(t))
        action, one_state = model.predict(obs[t, 0], state=one_state, episode_start=starts[t, 0],
                                          deterministic=False, rng=np.random.default_rng(t))
        assert np.shape(action) == () and one_state.shape == state.shape[1:]
        assert action == actions[0]
        np.testing.assert_allclose(one_state, state[0], rtol=1e-5, atol=1e-6)
    _, with_axis = model.predict(obs[0, 0], state=model.initial_state(1))  # one env's state with its env axis
    assert with_axis.shape == state.shape[1:]


def test_action_mask_of_one_observation():
    """One observation with its mask (bool [actions]) gets the one legal action, on-policy and deepq."""
    env = gym.make("MaskedBandit-v0")
    obs = np.array([0, 0, 1, 0], np.float32)
    mask = obs.astype(bool)
    for model in (PPO2Model(env.observation_space, env.action_space, seed=0),
                  DQNModel(env.observation_space, env.action_space, seed=0)):
        action, _ = model.predict(obs, action_masks=mask)
        assert np.shape(action) == () and action == 2, type(model).__name__


def test_script_loads_a_file_and_acts_on_one_observation(tmp_path):
    """The example of docs/usage.md "From Python": a saved model acts on the observation of a plain env."""
    env = gym.make("CartPole-v1")
    path = tmp_path / "cartpole.zip"
    PPO2Model(env.observation_space, env.action_space, seed=0).save(str(path))
    script = tmp_path / "act.py"
    script.write_text(
        "import gymnasium as gym\n"
        "from algos.base import load_model\n"
        f"model = load_model({str(path)!r})\n"
        "env = gym.make('CartPole-v1')\n"
        "obs, _ = env.reset(seed=0)\n"
        "for _ in range(3):\n"
        "    action, _ = model.predict(obs)\n"
        "    obs, reward, terminated, truncated, info = env.step(action)\n"
        "print('action', action, 'reward', reward)\n")
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": ROOT}, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "reward 1.0" in proc.stdout

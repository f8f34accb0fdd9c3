"""Invalid-action masking (``common.wrappers.action_mask``): the maths of masked distributions, where masks come from,
and learners that never take a masked action."""
from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
from gymnasium import spaces

from common.nn.distributions import make_pdtype, tf_masked_logits
from common.wrappers.action_mask import (
    PACKED_KEY,
    ActionMaskError,
    VecActionMasks,
    check_masks,
    masked_logits,
    random_masks,
)
from runner.env_factory import make_vec_env


def _random_masks(rng: np.random.Generator, rows: int, nvec: list[int]) -> np.ndarray:
    space = spaces.Discrete(nvec[0]) if len(nvec) == 1 else spaces.MultiDiscrete(nvec)
    return random_masks(rng, rows, space)


def _by_hand(logits: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, float]:
    """Probabilities over the legal actions only, and their entropy, in float64."""
    z = np.exp(logits[mask].astype(np.float64) - logits[mask].max())
    p = np.zeros(len(logits))
    p[mask] = z / z.sum()
    return p, float(-(p[mask] * np.log(p[mask])).sum())


@pytest.mark.parametrize("nvec", [[5], [3, 4, 2]], ids=["Discrete", "MultiDiscrete"])
def test_masked_neglogp_and_entropy_by_hand(nvec):
    space = spaces.Discrete(nvec[0]) if len(nvec) == 1 else spaces.MultiDiscrete(nvec)
    pd = make_pdtype(space)
    rng = np.random.default_rng(0)
    logits = (3 * rng.standard_normal((8, pd.param_size))).astype(np.float32)
    masks = _random_masks(rng, 8, nvec)
    splits = np.cumsum(nvec)[:-1]
    actions = np.stack([[rng.choice(np.flatnonzero(m)) for m in np.split(row, splits)] for row in masks])
    actions = actions[:, 0] if len(nvec) == 1 else actions
    want_nlp, want_ent = np.zeros(8), np.zeros(8)
    for i in range(8):
        for d, (lg, m) in enumerate(zip(np.split(logits[i], splits), np.split(masks[i], splits))):
            p, ent = _by_hand(lg, m)
            a = actions[i] if len(nvec) == 1 else actions[i, d]
            want_nlp[i] -= np.log(p[a])
            want_ent[i] += ent
    params = tf_masked_logits(tf.constant(logits), tf.constant(masks))
    np.testing.assert_allclose(pd.tf_neglogp(params, actions).numpy(), want_nlp, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pd.tf_entropy(params).numpy(), want_ent, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pd.np_neglogp(masked_logits(logits, masks), actions), want_nlp, rtol=1e-5, atol=1e-5)
    # gradients stay finite, and none reaches a masked logit
    x = tf.Variable(logits)
    with tf.GradientTape() as tape:
        p = tf_masked_logits(x, masks)
        loss = tf.reduce_sum(pd.tf_entropy(p)) + tf.reduce_sum(pd.tf_neglogp(p, actions))
    grad = tape.gradient(loss, x).numpy()
    assert np.isfinite(grad).all() and (grad[~masks] == 0).all() and (grad[masks] != 0).any()


@pytest.mark.parametrize("nvec", [[6], [3, 5]], ids=["Discrete", "MultiDiscrete"])
def test_a_masked_action_is_never_sampled(nvec):
    space = spaces.Discrete(nvec[0]) if len(nvec) == 1 else spaces.MultiDiscrete(nvec)
    pd = make_pdtype(space)
    rng = np.random.default_rng(1)
    n = 20000
    # the masked actions have by far the largest logits: only the mask keeps them from being drawn
    masks = _random_masks(rng, n, nvec)
    logits = np.where(masks, 0.0, 20.0).astype(np.float32) + rng.standard_normal((n, pd.param_size)).astype(np.float32)
    params = masked_logits(logits, masks)
    offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
    for actions in (pd.np_sample(params, rng), pd.np_mode(params)):
        flat = (actions.reshape(n, -1) + offsets).astype(np.int64)
        assert np.take_along_axis(masks, flat, axis=1).all()
    # and the legal ones are drawn with their renormalised probabilities
    one = np.repeat(np.array([[0.5, 2.0, 0.0, 1.0, -1.0, 0.3] + [0.0] * (pd.param_size - 6)], np.float32), n, 0)
    m = np.repeat(np.array([[True, False, True, True, False, True] + [True] * (pd.param_size - 6)]), n, 0)
    first = pd.np_sample(masked_logits(one, m), rng).reshape(n, -1)[:, 0]
    p, _ = _by_hand(one[0, :nvec[0]], m[0, :nvec[0]])
    np.testing.assert_allclose(np.bincount(first, minlength=nvec[0]) / n, p, atol=0.015)


def test_bad_masks_are_one_line_errors():
    check_masks(np.array([[True, False, False]]), spaces.Discrete(3))
    with pytest.raises(ActionMaskError, match="needs 3 entries"):
        check_masks(np.ones((2, 4), bool), spaces.Discrete(3))
    with pytest.raises(ActionMaskError, match="env 1 masks every action"):
        check_masks(np.array([[True, False, False], [False, False, False]]), spaces.Discrete(3))
    with pytest.raises(ActionMaskError, match="every action of a dimension"):
        check_masks(np.array([[True, False, False, False, False]]), spaces.MultiDiscrete([2, 3]))


@pytest.mark.parametrize("source,kind", [("info", "dummy"), ("method", "dummy"), ("dict", "dummy"),
                                         ("method", "subproc"), ("dict", "subproc")])
def test_masks_come_from_info_method_or_dict_key(source, kind):
    """MaskedBandit's observation is its mask: the masks read after every step (also across the resets of its
    2-step episodes) must equal it, and a Dict key is gone from the observation."""
    env = make_vec_env("MaskedBandit-v0", "envs", 3, seed=0, env_kwargs={"mask_source": source, "max_episode_steps": 2},
                       vec_env_kind=kind, in_series=1, logger_dir="")
    try:
        assert env.observation_space == spaces.Box(0.0, 1.0, (4,), np.float32)
        obs = env.reset()
        masks = VecActionMasks.of(env)
        assert masks is not None
        rng = np.random.default_rng(0)
        for _ in range(8):
            np.testing.assert_array_equal(masks.current, obs > 0.5)
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks.current])
            obs, _, dones, infos = env.step(actions)
            assert all(type(info["action_mask"]) is np.ndarray and PACKED_KEY not in info for info in infos)
            masks.update(infos, dones)
        assert dones.all()  # the last step ended episodes: the masks came from the reset infos
        np.testing.assert_array_equal(masks.current, obs > 0.5)
        assert env.get_attr("illegal_actions") == [0, 0, 0]
    finally:
        env.close()


def test_no_masks_without_a_source(monitored_venv):
    env = monitored_venv("IdentityDiscrete-v0")
    env.reset()
    assert VecActionMasks.of(env) is None


def _learns_without_masked_actions(learn, source: str, kind: str = "dummy", **kwargs) -> None:
    """Train on MaskedBandit (the rewarded action legal in 25% of the steps), then evaluate the deterministic
    policy: no masked action is ever taken, and the rewarded action is taken whenever it is legal. A policy
    that ignores the observation takes it about a third of the time."""
    from runner.evaluation import evaluate

    env, eval_env = (make_vec_env("MaskedBandit-v0", "envs", n, seed=0, env_kwargs={"mask_source": source},
                                  vec_env_kind=kind, logger_dir="") for n in (4, 2))
    try:
        model = learn(env=env, seed=0, **kwargs)
        assert env.get_attr("illegal_actions") == [0] * 4
        evaluate(model, eval_env, episodes=20)
        assert eval_env.get_attr("illegal_actions") == [0, 0]
        taken, legal = sum(eval_env.get_attr("rewarded_taken")), sum(eval_env.get_attr("rewarded_legal"))
        assert legal > 40 and taken / legal > 0.95, (taken, legal)
    finally:
        env.close()
        eval_env.close()


PPO_SETTINGS = {"total_timesteps": 4096, "nsteps": 64, "lr": 3e-3, "ent_coef": 0.0, "num_hidden": 32,
                "log_interval": 1000}


def test_ppo2_learns_the_rarely_legal_action():
    from algos.ppo2 import ppo2

    _learns_without_masked_actions(ppo2.learn, "info", **PPO_SETTINGS)


def test_ppo2_learns_with_masks_from_a_dict_key_in_subprocesses():
    from algos.ppo2 import ppo2

    _learns_without_masked_actions(ppo2.learn, "dict", "subproc", **PPO_SETTINGS)


def test_rollout_and_update_agree_on_masked_probabilities():
    """The neglogps stored during the rollout are those the update recomputes from the stored masks (so
    PPO's first ratio is 1), and they differ from the unmasked ones."""
    from algos.on_policy.runner import Runner
    from algos.ppo2.model import PPO2Model
    from algos.training import EpisodeStats

    env = make_vec_env("MaskedBandit-v0", "envs", 2, seed=0, env_kwargs={"mask_source": "method"}, logger_dir="")
    model = PPO2Model(env.observation_space, env.action_space, seed=0, network_kwargs={"num_hidden": 16})
    runner = Runner(env, model.policy, env.reset(), 32, 0.99, 0.95, np.random.default_rng(0), EpisodeStats())
    runner.run()
    st = runner.storage
    assert st.masks.shape == (32, 2, 4) and st.masks.sum() < st.masks.size
    masked, _, _ = model.policy.evaluate(st.flat("obs"), st.flat("actions"), masks=st.flat("masks"))
    plain, _, _ = model.policy.evaluate(st.flat("obs"), st.flat("actions"))
    np.testing.assert_allclose(masked.numpy(), st.flat("neglogps"), rtol=1e-5, atol=1e-5)
    assert np.abs(plain.numpy() - st.flat("neglogps")).max() > 0.1
    env.close()


DQN_SETTINGS = {"total_timesteps": 3000, "learning_starts": 200, "train_freq": 16, "gradient_steps": 8, "exploration_fraction": 0.3, "lr": 1e-3,
                "gamma": 0.5, "target_network_update_freq": 100, "hiddens": [32], "num_hidden": 32, "print_freq": 0}


def test_deepq_learns_the_rarely_legal_action():
    from algos.deepq import deepq

    _learns_without_masked_actions(deepq.learn, "method", **DQN_SETTINGS)


@pytest.mark.parametrize("double_q", [False, True])
def test_deepq_target_maximises_over_legal_next_actions(double_q):
    """The TD errors of a training step are ``Q(s, a) - (r + gamma * max over the legal a' of Q(s', a'))``."""
    from algos.deepq.model import DQNModel

    model = DQNModel(spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(5), seed=0, hiddens=[16], gamma=0.9,
                     double_q=double_q, network_kwargs={"num_hidden": 16})
    rng = np.random.default_rng(0)
    obs, next_obs = (rng.uniform(-1, 1, (1, 8, 3)).astype(np.float32) for _ in range(2))
    masks = _random_masks(rng, 8, [5])[None]
    batch = {"obs": obs, "actions": rng.integers(0, 5, (1, 8)), "rewards": rng.standard_normal((1, 8)).astype(np.float32),
             "next_obs": next_obs, "dones": np.zeros((1, 8), np.float32), "next_masks": masks}
    q, q_next = model.q_values(obs[0]), model.q_values(next_obs[0])  # target network == online network here
    want = q[np.arange(8), batch["actions"][0]] - (batch["rewards"][0] + 0.9 * np.where(masks[0], q_next, -np.inf).max(1))
    unmasked = q[np.arange(8), batch["actions"][0]] - (batch["rewards"][0] + 0.9 * q_next.max(1))
    assert np.abs(want - unmasked).max() > 1e-3  # the masks matter in this batch
    td, _ = model.train(batch, 1e-3)
    np.testing.assert_allclose(td[0], want, rtol=1e-4, atol=1e-5)


def test_deepq_acts_only_legal_actions():
    from algos.deepq.model import DQNModel

    model = DQNModel(spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(6), seed=0, hiddens=[16],
                     network_kwargs={"num_hidden": 16})
    rng = np.random.default_rng(0)
    masks = _random_masks(rng, 5000, [6])
    x = rng.uniform(-1, 1, (5000, 3)).astype(np.float32)
    for eps in (0.0, 0.5, 1.0):
        actions = model.act(x, eps, rng, masks)
        assert masks[np.arange(5000), actions].all()
    random_actions = model.act(x[:1].repeat(20000, 0), 1.0, rng, np.tile([[True, False, True, True, False, False]],
                                                                          (20000, 1)))
    np.testing.assert_allclose(np.bincount(random_actions, minlength=6) / 20000, [1 / 3, 0, 1 / 3, 1 / 3, 0, 0],
                               atol=0.015)


@pytest.mark.parametrize("alg,action_space,fmt", [
    ("ppo2", spaces.Discrete(6), "saved_model"), ("ppo2", spaces.Discrete(6), "tflite"),
    ("ppo2", spaces.MultiDiscrete([3, 4]), "onnx"), ("deepq", spaces.Discrete(6), "saved_model"),
])
def test_exported_policy_with_action_mask_input(alg, action_space, fmt, tmp_path):
    """``python -m export --action_mask``: the artifact's actions on 500 observations and random masks are
    ``predict``'s with the same masks, all legal; without the flag there is no mask input."""
    import export
    from common.nn.policy_export import input_arrays

    observation_space = spaces.Box(-3.0, 3.0, (3,), np.float32)
    model = _model_class(alg)(observation_space, action_space, seed=1, network_kwargs={"num_hidden": 16})
    path, out = str(tmp_path / "model.zip"), str(tmp_path / ("policy" if fmt == "saved_model" else f"policy.{fmt}"))
    model.save(path)
    export.main([path, f"--format={fmt}", f"--out={out}", "--action_mask"])
    rng = np.random.default_rng(0)
    obs = rng.uniform(-3, 3, (500, 3)).astype(np.float32)
    masks = random_masks(rng, 500, action_space)
    got = _run_artifact(fmt, out, {**input_arrays(observation_space, obs), "action_mask": masks})["action"]
    want = model.predict(obs, deterministic=True, action_masks=masks)[0]
    np.testing.assert_array_equal(got, want)
    offsets = np.concatenate([[0], np.cumsum(np.ravel(getattr(action_space, "nvec", [6])))[:-1]])
    assert np.take_along_axis(masks, got.reshape(500, -1) + offsets, axis=1).all()
    assert (want != model.predict(obs, deterministic=True)[0]).any()  # the masks changed some actions


def _model_class(alg: str):
    from algos.deepq.model import DQNModel
    from algos.ppo2.model import PPO2Model

    return {"ppo2": PPO2Model, "deepq": DQNModel}[alg]


def _run_artifact(fmt: str, path: str, feed: dict) -> dict:
    if fmt == "saved_model":
        fn = tf.saved_model.load(path).signatures["serving_default"]
        return {k: v.numpy() for k, v in fn(**{n: tf.constant(a) for n, a in feed.items()}).items()}
    if fmt == "tflite":
        with warnings.catch_warnings():  # TF's interpreter moves to ai_edge_litert (same API)
            warnings.simplefilter("ignore")
            return tf.lite.Interpreter(model_path=path).get_signature_runner()(**feed)
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))


class _FixedMaskEnv(gym.Env):
    """Box(2) observations, 4 actions (or a Box action space), the same ``mask`` in every info."""

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

    def __init__(self, mask: np.ndarray, box_actions: bool = False) -> None:
        self.mask = mask
        self.action_space = spaces.Box(-1.0, 1.0, (4,), np.float32) if box_actions else spaces.Discrete(4)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {"action_mask": self.mask}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, False, {"action_mask": self.mask}


@pytest.mark.parametrize("mask,box,message", [
    (np.ones(3, bool), False, r"action mask of shape \(3,\) does not fit the action space Discrete\(4\)"),
    (np.zeros(4, bool), False, "the action mask of env 0 masks every action"),
    (np.ones(4, bool), True, "masks need a Discrete or MultiDiscrete action space"),
])
def test_a_bad_mask_stops_training_with_a_user_error(mask, box, message):
    from algos.ppo2 import ppo2
    from common.errors import UserError
    from common.vec_env import DummyVecEnv

    env = DummyVecEnv([lambda: _FixedMaskEnv(mask, box)])
    with pytest.raises(ActionMaskError, match=message) as caught:
        ppo2.learn(env=env, total_timesteps=32, nsteps=16, seed=0)
    assert isinstance(caught.value, UserError) and "\n" not in str(caught.value)


class _MultiDiscreteMaskEnv(gym.Env):
    """MultiDiscrete([3, 2]) actions with random per-dimension masks in the info; counts illegal actions."""

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.MultiDiscrete([3, 2])

    def __init__(self) -> None:
        self.illegal_actions = 0

    def _obs_info(self):
        self.mask = random_masks(self.np_random, 1, self.action_space)[0]
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), {"action_mask": self.mask}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs_info()

    def step(self, action):
        self.illegal_actions += int(not (self.mask[action[0]] and self.mask[3 + action[1]]))
        obs, info = self._obs_info()
        return obs, float(action[0] == 0), False, False, info


@pytest.mark.parametrize("network", ["mlp", "lstm"])
def test_multidiscrete_and_recurrent_ppo2_train_on_masks(network):
    """ppo2 on MultiDiscrete masks (feed-forward) and on a recurrent policy (masks gathered per env column):
    no illegal action in training, and the update ran on the stored masks."""
    from algos.ppo2 import ppo2
    from common.vec_env import DummyVecEnv
    from envs.masked_bandit import MaskedBanditEnv

    make = _MultiDiscreteMaskEnv if network == "mlp" else MaskedBanditEnv
    env = DummyVecEnv([make for _ in range(4)])
    model = ppo2.learn(env=env, network=network, total_timesteps=512, nsteps=32, nminibatches=2, seed=0,
                       **({"num_hidden": 16} if network == "mlp" else {"nlstm": 16}))
    assert model.num_timesteps == 512
    assert env.get_attr("illegal_actions") == [0, 0, 0, 0]


def test_a2c_learns_the_rarely_legal_action():
    from algos.a2c import a2c

    _learns_without_masked_actions(a2c.learn, "info", total_timesteps=6000, nsteps=8, lr=3e-3, ent_coef=0.0,
                                   num_hidden=32, log_interval=10**6)


def test_trpo_learns_the_rarely_legal_action():
    from algos.trpo import trpo

    _learns_without_masked_actions(trpo.learn, "info", total_timesteps=6000, timesteps_per_batch=512, num_hidden=32)


def test_deepq_with_parameter_noise_learns_the_rarely_legal_action():
    from algos.deepq import deepq

    _learns_without_masked_actions(deepq.learn, "info", **DQN_SETTINGS, param_noise=True)


class _TwoKeyDictEnv(gym.Env):
    """Dict observations {"board", "turn", "action_mask"} with 3 actions."""

    observation_space = spaces.Dict({"board": spaces.Box(0.0, 1.0, (4,), np.float32), "turn": spaces.Discrete(2),
                                     "action_mask": spaces.MultiBinary(3)})
    action_space = spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return {"board": np.zeros(4, np.float32), "turn": 0, "action_mask": np.array([1, 0, 1], np.int8)}, {}

    def step(self, action):
        obs = {"board": np.ones(4, np.float32), "turn": 1, "action_mask": np.array([0, 1, 0], np.int8)}
        return obs, 0.0, False, False, {}


def test_a_dict_key_mask_leaves_the_other_keys_to_the_policy():
    from common.wrappers.action_mask import ActionMaskInfo, wrap_action_masks

    env = wrap_action_masks(_TwoKeyDictEnv())
    assert isinstance(env, ActionMaskInfo)
    assert set(env.observation_space.spaces) == {"board", "turn"}
    obs, info = env.reset(seed=0)
    assert set(obs) == {"board", "turn"} and info["action_mask"].tolist() == [True, False, True]
    obs, _, _, _, info = env.step(0)
    assert set(obs) == {"board", "turn"} and info["action_mask"].tolist() == [False, True, False]
    assert not isinstance(wrap_action_masks(gym.make("CartPole-v1")), ActionMaskInfo)

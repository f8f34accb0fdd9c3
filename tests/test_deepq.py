"""deepq: learning the identity env, replay targets through truncation, parameter noise,
bad input."""

import itertools
import os

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import envs  # noqa: F401  (registers the identity envs)
from algos.deepq import deepq
from algos.deepq.model import DQNModel
from algos.deepq.param_noise import ParamNoiseExplorer, kl_threshold, mean_kl, perturb
from algos.hyperparameters import shipped_entry
from common.buffers.prioritized import PrioritizedReplayBuffer
from common.buffers.replay import terminal_aware_next
from common.errors import ConfigError
from common.files.model_file import ModelFileError
from common.nn.obs_encoding import ObsEncoder
from runner.env_factory import make_vec_env

FAST = {"network": "mlp", "num_layers": 1, "num_hidden": 32, "hiddens": [32], "lr": 5e-3, "buffer_size": 5000,
        "batch_size": 32, "learning_starts": 200, "train_freq": 64, "gradient_steps": 32,
        "target_network_update_freq": 64, "gamma": 0.5, "exploration_fraction": 0.4,
        "exploration_final_eps": 0.02, "print_freq": 0, "save_interval": 0}


def _greedy_return(model, env_id: str, episodes: int = 3, seed: int = 123) -> float:
    env = gym.make(env_id)
    total = 0.0
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        done = False
        while not done:
            action, _ = model.predict(np.asarray([obs]))
            obs, r, term, trunc, _ = env.step(int(action[0]))
            total += r
            done = term or trunc
    return total / episodes


@pytest.fixture(scope="module")
def identity_model():
    env = make_vec_env("IdentityDiscrete-v0", "envs", 4, seed=0, vec_env_kind="dummy")
    model = deepq.learn(env=env, total_timesteps=3000, seed=0, **FAST)
    env.close()
    return model


def test_identity_discrete_learned_near_optimally_with_four_envs(identity_model) -> None:
    # a random policy scores 25 per 100-step episode (4 values), the optimum is 100
    assert _greedy_return(identity_model, "IdentityDiscrete-v0") >= 95.0
    assert identity_model.num_timesteps == 3000


def test_numpy_mirror_matches_tf_forward_with_dueling_and_layer_norm() -> None:
    space = spaces.Box(-1, 1, (5,), np.float32)
    model = DQNModel(space, spaces.Discrete(3), network="mlp", network_kwargs={"num_hidden": 16},
                     hiddens=[8, 8], dueling=True, layer_norm=True, seed=1)
    x = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
    assert model.q.has_numpy_mirror
    np.testing.assert_allclose(model.q_values(x), model._q_tf(x).numpy(), rtol=1e-5, atol=1e-5)


def _regression_batch(steps: int) -> dict:
    """Gradient-step batches ``[steps, 16, ...]`` of 2-d observations, rewarded twice their first coordinate."""
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (steps, 16, 2)).astype(np.float32)
    return {"obs": obs, "actions": rng.integers(0, 2, (steps, 16)), "rewards": obs[..., 0] * 2,
            "next_obs": obs, "dones": np.zeros((steps, 16), np.float32)}


def test_train_block_reduces_td_error_and_target_copy_is_skipped_when_unchanged() -> None:
    space = spaces.Box(-1, 1, (2,), np.float32)
    model = DQNModel(space, spaces.Discrete(2), network="mlp", network_kwargs={"num_hidden": 16}, hiddens=[],
                     dueling=False, double_q=True, gamma=0.0, seed=0)
    batch = _regression_batch(8)
    td0, _ = model.train(batch, 1e-2)
    assert td0.shape == (8, 16)
    for _ in range(20):
        td, _ = model.train(batch, 1e-2)
    assert np.abs(td).mean() < 0.5 * np.abs(td0[0]).mean()
    assert model.update_target() is True
    assert model.update_target() is False  # nothing trained since: copy skipped
    np.testing.assert_array_equal(model.target_q.adv.out.w.numpy(), model.q.adv.out.w.numpy())



@pytest.mark.parametrize("noisy", [False, True])
def test_weights_read_back_by_training_are_the_networks_weights(noisy: bool) -> None:
    space = spaces.Box(-1, 1, (2,), np.float32)
    model = DQNModel(space, spaces.Discrete(2), network="mlp", network_kwargs={"num_hidden": 16}, hiddens=[8],
                     dueling=True, noisy=noisy, seed=0)
    model.train(_regression_batch(3), 1e-2)
    assert model._np_params is not None  # the weights came back with the training call
    (net, adv, value), sigmas = model._np_params, model._np_sigmas
    fresh_net, fresh_adv, fresh_value = model.q.numpy_params()
    got, want = [*net, *adv, *value], [*fresh_net, *fresh_adv, *fresh_value]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert any(np.any(w != 0) for w in adv)  # trained weights, not a zero buffer
    if noisy:
        assert len(sigmas) == len(model.q.noise_shapes())
        for g, w in zip(sigmas, model.q.numpy_sigmas()):
            np.testing.assert_array_equal(g[0], w[0])
            np.testing.assert_array_equal(g[1], w[1])
    else:
        assert sigmas is None


def test_one_step_blocks_train_as_the_steps_of_a_longer_block() -> None:
    space = spaces.Box(-1, 1, (2,), np.float32)
    models = [DQNModel(space, spaces.Discrete(2), network="mlp", network_kwargs={"num_hidden": 16}, hiddens=[],
                       dueling=False, seed=0) for _ in range(3)]  # the third stays untrained
    batch = _regression_batch(2)
    td_block, _ = models[0].train(batch, 1e-2)
    td_steps = [models[1].train({k: v[i:i + 1] for k, v in batch.items()}, 1e-2)[0] for i in range(2)]
    np.testing.assert_allclose(np.concatenate(td_steps), td_block, rtol=1e-6, atol=1e-7)
    for a, b in zip(models[0].q.numpy_params()[1], models[1].q.numpy_params()[1]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert not np.allclose(models[1].q.numpy_params()[1][0], models[2].q.numpy_params()[1][0])  # the weights moved


def test_terminal_aware_next_encodes_terminal_observations_and_bootstraps_truncation() -> None:
    enc = ObsEncoder(spaces.Discrete(5))
    new_obs = enc(np.array([0, 1, 2]))
    infos = [{"terminal_observation": np.int64(4), "TimeLimit.truncated": True},
             {}, {"terminal_observation": np.int64(3), "TimeLimit.truncated": False}]
    next_obs, terminated = terminal_aware_next(new_obs, np.array([True, False, True]), infos, enc.encode_list)
    np.testing.assert_array_equal(next_obs.argmax(1), [4, 1, 3])
    np.testing.assert_array_equal(terminated, [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(new_obs.argmax(1), [0, 1, 2])  # input not modified


def test_prioritized_replay_and_checkpoints(csv_log_dir) -> None:
    env = make_vec_env("IdentityDiscrete-v0", "envs", 2, seed=1, vec_env_kind="dummy", logger_dir="")
    kw = {**FAST, "save_interval": 500, "print_freq": 10}
    model = deepq.learn(env=env, total_timesteps=1200, seed=1, prioritized_replay=True,
                        gradient_steps_per_call=8, **kw)
    env.close()
    assert sorted(os.listdir(csv_log_dir / "checkpoints")) == ["0000000500.zip", "0000001000.zip"]
    assert deepq.load(str(csv_log_dir / "checkpoints" / "0000001000.zip")).q.num_actions == 4
    assert model.num_timesteps == 1200
    assert "rollout/ep_rew_mean" in (csv_log_dir / "progress.csv").read_text().splitlines()[0]


@pytest.mark.parametrize("normalise", ["buffer", "batch"])
def test_prioritized_replay_weights_setting_reaches_the_sampler(normalise, monkeypatch) -> None:
    seen = set()
    sample = PrioritizedReplayBuffer.sample

    def recording_sample(self, *args, **kwargs):
        seen.add(kwargs.get("normalise"))
        return sample(self, *args, **kwargs)

    monkeypatch.setattr(PrioritizedReplayBuffer, "sample", recording_sample)
    env = make_vec_env("IdentityDiscrete-v0", "envs", 1, seed=0, vec_env_kind="dummy")
    deepq.learn(env=env, total_timesteps=300, seed=0, prioritized_replay=True, prioritized_replay_weights=normalise,
                **{**FAST, "learning_starts": 100})
    env.close()
    assert seen == {normalise}


def test_callback_stops_training() -> None:
    env = make_vec_env("IdentityDiscrete-v0", "envs", 1, seed=0, vec_env_kind="dummy")
    model = deepq.learn(env=env, total_timesteps=1000, seed=0, callback=lambda step: step.t >= 50, **FAST)
    assert model.num_timesteps == 50
    env.close()


def test_actions_are_uniform_until_learning_starts_then_follow_the_schedule() -> None:
    # stable-baselines3's semantics: the first learning_starts steps act uniformly at random (epsilon 1),
    # whatever the schedule's initial value; afterwards epsilon is the schedule's
    env = make_vec_env("IdentityDiscrete-v0", "envs", 1, seed=0, vec_env_kind="dummy")
    seen: dict[int, float] = {}

    def record(step):
        seen[step.t_prev] = step.eps
        return False

    kw = {**FAST, "exploration_initial_eps": 0.5, "exploration_final_eps": 0.5, "learning_starts": 200}
    deepq.learn(env=env, total_timesteps=400, seed=0, callback=record, **kw)
    env.close()
    assert all(seen[t] == 1.0 for t in range(200))
    assert all(seen[t] == 0.5 for t in range(200, 400))


def test_xla_block_computes_what_the_plain_block_does_and_only_for_mlp_networks() -> None:
    space = spaces.Box(-1, 1, (2,), np.float32)
    kw = {"network": "mlp", "network_kwargs": {"num_hidden": 16}, "hiddens": [], "double_q": True, "gamma": 0.9,
          "seed": 0}
    plain, xla = DQNModel(space, spaces.Discrete(2), **kw), DQNModel(space, spaces.Discrete(2), jit_compile=True, **kw)
    assert xla.jit_compile and not plain.jit_compile
    batch = _regression_batch(8)
    for _ in range(3):
        (td_plain, loss_plain), (td_xla, loss_xla) = plain.train(batch, 1e-2), xla.train(batch, 1e-2)
        np.testing.assert_allclose(td_xla, td_plain, rtol=1e-4, atol=1e-5)
        assert loss_xla == pytest.approx(loss_plain, rel=1e-4)
    np.testing.assert_allclose(xla.q.adv.out.w.numpy(), plain.q.adv.out.w.numpy(), rtol=1e-4, atol=1e-5)
    image = spaces.Box(0, 255, (36, 36, 1), np.uint8)
    assert not DQNModel(image, spaces.Discrete(2), network="conv_only", hiddens=[8], jit_compile=True, seed=0).jit_compile


def test_jit_compile_auto_asks_for_a_long_enough_run() -> None:
    env = make_vec_env("IdentityDiscrete-v0", "envs", 1, seed=0, vec_env_kind="dummy")
    short = deepq.learn(env=env, total_timesteps=400, seed=0, **{**FAST, "jit_compile": "auto"})
    assert not short.jit_compile and short.hyperparameters["jit_compile"] is False  # 3 blocks of 32 steps
    # after learning_starts (200), 313 blocks of one env step x 32 gradient steps: 10,016 gradient steps
    model = deepq.learn(env=env, total_timesteps=513, seed=0, **{**FAST, "jit_compile": "auto", "train_freq": 1})
    assert model.jit_compile and model.hyperparameters["jit_compile"] is True
    with pytest.raises(ConfigError, match="jit_compile"):
        deepq.learn(env=env, total_timesteps=400, seed=0, **{**FAST, "jit_compile": "sometimes"})
    env.close()


def test_policy_network_is_a_moving_average_of_the_online_weights(tmp_path) -> None:
    space = spaces.Box(-1, 1, (2,), np.float32)
    kw = {"network": "mlp", "network_kwargs": {"num_hidden": 16}, "hiddens": [], "dueling": False, "seed": 0}
    plain = DQNModel(space, spaces.Discrete(2), **kw)
    assert plain.policy_q is plain.q  # 0: the policy is the online network
    model = DQNModel(space, spaces.Discrete(2), policy_average_steps=50, **kw,
                     hyperparameters={"hiddens": [], "dueling": False, "policy_average_steps": 50})
    w0 = model.q.adv.out.w.numpy()
    np.testing.assert_array_equal(model.policy_q.adv.out.w.numpy(), w0)  # starts at the online weights
    model.train(_regression_batch(8), 1e-2)
    w1 = model.q.adv.out.w.numpy()
    rate = 1.0 - (1.0 - 1.0 / 50) ** 8  # 8 gradient steps in one call
    np.testing.assert_allclose(model.policy_q.adv.out.w.numpy(), w0 + rate * (w1 - w0), rtol=1e-5, atol=1e-6)
    x = np.random.default_rng(1).uniform(-1, 1, (64, 2)).astype(np.float32)
    np.testing.assert_allclose(model.q_values(x, policy=True), model._policy_q_tf(x).numpy(), rtol=1e-5, atol=1e-5)
    greedy_policy = np.argmax(model.q_values(x, policy=True), axis=1)
    np.testing.assert_array_equal(model.predict(x)[0], greedy_policy)  # predict (evaluation, --play) acts on it
    model.update_target()  # a target copy leaves the policy network alone
    np.testing.assert_allclose(model.policy_q.adv.out.w.numpy(), w0 + rate * (w1 - w0), rtol=1e-5, atol=1e-6)
    model.save(str(tmp_path / "m.zip"))
    loaded = deepq.load(str(tmp_path / "m.zip"))
    np.testing.assert_array_equal(loaded.policy_q.adv.out.w.numpy(), model.policy_q.adv.out.w.numpy())
    np.testing.assert_array_equal(loaded.predict(x)[0], greedy_policy)
    with pytest.raises(ConfigError, match="policy_average_steps must be >= 0"):
        DQNModel(space, spaces.Discrete(2), policy_average_steps=-1, **kw)


def test_bad_input_gives_one_line_errors(tmp_path, monkeypatch) -> None:
    box_env = make_vec_env("IdentityBox-v0", "envs", 1, seed=0, vec_env_kind="dummy")
    with pytest.raises(ConfigError, match=r"Discrete action space.*Box\(") as e:
        deepq.learn(env=box_env, total_timesteps=10)
    assert "\n" not in str(e.value)
    env = make_vec_env("IdentityDiscrete-v0", "envs", 1, seed=0, vec_env_kind="dummy")
    with pytest.raises(ConfigError, match="param_noise_adaption_interval must be at least 1") as e:
        deepq.learn(env=env, total_timesteps=10, param_noise=True, param_noise_adaption_interval=0)
    assert "\n" not in str(e.value)
    monkeypatch.setattr(deepq.mpi_util, "size", lambda: 2)
    with pytest.raises(ValueError, match="MPI"):
        deepq.learn(env=env, total_timesteps=10)
    monkeypatch.undo()
    (tmp_path / "junk.zip").write_text("not a model")
    with pytest.raises(ModelFileError):
        deepq.load(str(tmp_path / "junk.zip"))
    model = DQNModel(spaces.Discrete(3), spaces.Discrete(3), network="mlp", hiddens=[], seed=0)
    model.save(str(tmp_path / "m.zip"))
    with pytest.raises(ModelFileError, match="observation space"):
        deepq.load(str(tmp_path / "m.zip"), env)  # Discrete(3) model, Discrete(4) env
    box_env.close()
    env.close()


@pytest.mark.slow
def test_cartpole_solved_with_classic_control_defaults() -> None:
    """The bench run for one seed (about 15-40 s): the greedy policy balances the pole for 500 steps."""

    env = make_vec_env("CartPole-v1", "classic_control", 1, seed=0, vec_env_kind="dummy")
    kw = {**shipped_entry("deepq", "classic_control"), "print_freq": 0, "save_interval": 0}
    model = deepq.learn(env=env, total_timesteps=50_000, seed=0, **kw)
    env.close()
    assert _greedy_return(model, "CartPole-v1", episodes=5, seed=1000) >= 475.0


def test_image_observations_use_the_tf_path_with_conv_only_dueling_head() -> None:
    space = spaces.Box(0, 255, (36, 36, 2), np.uint8)
    model = DQNModel(space, spaces.Discrete(3, start=1), network="conv_only", hiddens=[16], dueling=True, seed=0)
    assert not model.q.has_numpy_mirror
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 256, (2, 4, 36, 36, 2), dtype=np.uint8)
    batch = {"obs": obs, "actions": rng.integers(0, 3, (2, 4)), "rewards": np.ones((2, 4), np.float32),
             "next_obs": obs[:, ::-1], "dones": np.zeros((2, 4), np.float32)}
    td, loss = model.train(batch, 1e-3)
    assert td.shape == (2, 4) and np.isfinite(loss)
    actions, _ = model.predict(obs[0])
    assert actions.shape == (4,) and set(actions.tolist()) <= {1, 2, 3}  # Discrete start honoured


# ---------------------------------------------------------------- parameter-space noise


def _small_model(layer_norm: bool = True) -> DQNModel:
    return DQNModel(spaces.Box(-1, 1, (5,), np.float32), spaces.Discrete(4), network="mlp",
                    network_kwargs={"num_hidden": 16}, hiddens=[8], dueling=True,
                    layer_norm=layer_norm, seed=1)


def _obs(n: int = 64) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((n, 5)).astype(np.float32)


def test_param_noise_perturbed_forward_departs_with_sigma_and_spares_layer_norm() -> None:
    model = _small_model()
    explorer = ParamNoiseExplorer(model, 1, np.random.default_rng(0))
    x, params, noise = _obs(), model.numpy_params(), explorer._noise[0]
    q = model.q_values(x)
    np.testing.assert_array_equal(model.q.numpy_forward(x, perturb(params, noise, 0.0)), q)
    gaps = [np.abs(model.q.numpy_forward(x, perturb(params, noise, s)) - q).mean() for s in (1e-3, 1e-2, 1e-1, 1.0)]
    assert all(b > 2 * a for a, b in itertools.pairwise(gaps)), gaps
    assert gaps[0] > 0
    perturbed = perturb(params, noise, 0.1)
    for branch, pbranch, mbranch in zip(params, perturbed, model.q.perturbable()):
        for p, pp, m in zip(branch, pbranch, mbranch):
            assert (pp is p) != m  # layer-norm gains/offsets shared untouched, every weight and bias moved
            assert not m or not np.array_equal(pp, p)
    assert [sum(not m for m in branch) for branch in model.q.perturbable()] == [0, 2, 2]  # head layer-norms
    # acting uses the perturbed copy; the model itself (predict) stays unperturbed
    explorer.spec.current_stddev = 1.0
    np.testing.assert_array_equal(explorer.actions(x[:1]), model.q.numpy_forward(x[:1], explorer.perturbed_params(0)).argmax(1))
    np.testing.assert_array_equal(model.q_values(x), q)


def test_param_noise_adaptation_moves_sigma_toward_the_kl_threshold() -> None:
    model, x = _small_model(), _obs()
    assert kl_threshold(0.0, 4) == 0.0 and np.isclose(kl_threshold(1.0, 4), np.log(4))
    q = model.q_values(x)
    assert mean_kl(q, q) == 0.0 and mean_kl(q, q[:, ::-1]) > 0
    low = ParamNoiseExplorer(model, 1, np.random.default_rng(0), initial_sigma=1e-4)
    kl = low.adapt(x, eps=0.5)  # KL of a tiny perturbation is far below the threshold 0.46: grow
    assert kl < low.last_threshold and np.isclose(low.sigma, 1e-4 * 1.01)
    high = ParamNoiseExplorer(model, 1, np.random.default_rng(0), initial_sigma=10.0)
    kl = high.adapt(x, eps=0.01)  # KL of a huge perturbation is far above the threshold 0.0075: shrink
    assert kl > high.last_threshold and np.isclose(high.sigma, 10.0 / 1.01)
    # from both sides sigma settles where the KL straddles the threshold (faster coefficient for the test)
    settled = []
    for ex in (low, high):
        ex.spec.adoption_coefficient = 1.05
        kls = [ex.adapt(x, eps=0.1) for _ in range(400)]
        below = np.mean(np.array(kls[-150:]) < kl_threshold(0.1, 4))
        assert 0.2 < below < 0.8, below
        settled.append(ex.sigma)
    assert 1 / 3 < settled[0] / settled[1] < 3, settled


def test_param_noise_resamples_only_the_env_whose_episode_ended() -> None:
    model = _small_model(layer_norm=False)
    explorer = ParamNoiseExplorer(model, 3, np.random.default_rng(0))
    before = [explorer.perturbed_params(i) for i in range(3)]
    noise = list(explorer._noise)
    explorer.reset(np.array([1]))
    assert explorer._noise[0] is noise[0] and explorer._noise[2] is noise[2] and explorer._noise[1] is not noise[1]
    assert explorer.perturbed_params(0) is before[0] and explorer.perturbed_params(2) is before[2]
    assert not np.array_equal(explorer.perturbed_params(1)[1][0], before[1][1][0])
    # new weights (training) rebuild every copy with the same directions
    model.q.adv.out.b.assign(model.q.adv.out.b.numpy() + 1.0)
    model._np_params = None
    after = explorer.perturbed_params(0)
    np.testing.assert_allclose(after[1][-1], before[0][1][-1] + 1.0, rtol=1e-6)


def test_param_noise_needs_a_numpy_mirror() -> None:
    env = make_vec_env("IdentityDiscrete-v0", "envs", 1, seed=0, vec_env_kind="dummy")
    kw = {**FAST, "activation": lambda h: h}  # a custom activation callable: no numpy mirror
    with pytest.raises(ConfigError, match="param_noise needs a Q-network with a numpy mirror") as e:
        deepq.learn(env=env, total_timesteps=10, param_noise=True, **kw)
    assert "\n" not in str(e.value)
    env.close()


def test_identity_discrete_learned_with_param_noise_and_four_envs() -> None:
    env = make_vec_env("IdentityDiscrete-v0", "envs", 4, seed=0, vec_env_kind="dummy")
    seen: dict[int, tuple[float, float]] = {}

    def record(step):
        seen[step.t_prev] = (step.eps, step.explorer.sigma)
        return False

    model = deepq.learn(env=env, total_timesteps=3000, seed=0, param_noise=True, callback=record, **FAST)
    env.close()
    assert _greedy_return(model, "IdentityDiscrete-v0") >= 95.0  # random policy: 25
    assert all(seen[t][0] == 1.0 for t in range(0, 200, 4))  # uniform until learning_starts, then epsilon 0
    assert all(seen[t][0] == 0.0 for t in range(200, 3000, 4))
    assert seen[192][1] == 0.01 and seen[2996][1] != 0.01  # sigma adapted once learning started
    assert model.hyperparameters["param_noise"] is True

"""Hindsight experience replay: the bit-flipping goal env, the HER buffer's relabelling (rewards, goals from
the same episode and not from its past, interleaved envs, truncation), --alg=her end to end, and the
one-line error for a Fetch env without gymnasium-robotics."""
from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import envs  # noqa: F401 - registers BitFlipping-v0
from common.buffers.her import HerReplayBuffer, vec_env_reward
from runner.env_factory import make_vec_env

SENTINEL = -1.0  # the desired goal every synthetic transition is stored with


def test_bit_flipping_env():
    env = gym.make("BitFlipping-v0", n_bits=5)
    obs, info = env.reset(seed=0)
    assert set(obs) == {"observation", "achieved_goal", "desired_goal"} and not info["is_success"]
    flip = np.where(obs["achieved_goal"] != obs["desired_goal"], 1.0, -1.0)
    obs, reward, terminated, truncated, info = env.step(flip)  # flips exactly the differing bits
    assert reward == 0.0 and info["is_success"] and not terminated and not truncated
    np.testing.assert_array_equal(obs["achieved_goal"], obs["desired_goal"])
    for step in range(2, 6):
        obs, reward, terminated, truncated, info = env.step(-np.ones(5))  # flips nothing: stays at the goal
        assert reward == 0.0 and truncated == (step == 5) and not terminated
    batch = env.unwrapped.compute_reward(np.array([[0, 1], [1, 1]]), np.array([[0, 1], [0, 1]]), {})
    np.testing.assert_array_equal(batch, [0.0, -1.0])


class _Counting:
    """A compute_reward that counts its calls."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, achieved, desired, info):
        self.calls += 1
        return self.fn(achieved, desired, info)


def test_relabelled_rewards_equal_compute_reward_of_the_new_goals():
    venv = make_vec_env("BitFlipping-v0", "envs", 4, 0, env_kwargs={"n_bits": 3}, flatten_dict_observations=False)
    compute = _Counting(vec_env_reward(venv))
    buffer = HerReplayBuffer(1000, venv.observation_space, 3, 4, compute, strategy="future")
    rng = np.random.default_rng(0)
    obs = venv.reset()
    for _ in range(60):
        actions = rng.uniform(-1, 1, (4, 3)).astype(np.float32)
        new_obs, rewards, dones, infos = venv.step(actions)
        buffer.store(obs, None, actions, rewards, new_obs, None, dones, infos)
        obs = new_obs
    batch = buffer.sample((8, 64), rng)
    reward_fn = venv.get_attr("unwrapped")[0].compute_reward
    venv.close()
    assert compute.calls == 1  # one vectorised call per sample, whatever the batch
    assert batch["rewards"].shape == (8, 64) and batch["obs"]["desired_goal"].shape == (8, 64, 3)
    want = reward_fn(batch["next_obs"]["achieved_goal"], batch["next_obs"]["desired_goal"], {})
    np.testing.assert_array_equal(batch["rewards"], want)
    np.testing.assert_array_equal(batch["obs"]["desired_goal"], batch["next_obs"]["desired_goal"])
    # random actions on 3 bits rarely hit the real goal; relabelled goals often are the achieved one
    assert 0.3 < np.mean(batch["rewards"] == 0.0) < 0.95
    assert np.all(batch["dones"] == 0.0)  # bit flipping only truncates: every transition bootstraps


def _synthetic_buffer(strategy: str, capacity: int = 4000, n_envs: int = 4, seed: int = 0):
    """A buffer fed by ``n_envs`` interleaved fake goal envs whose episodes have random lengths: observation
    = [episode id, t], the achieved goal after step t = [episode id, t + 1]; (buffer, lengths by id, ids of
    episodes in flight)."""
    box = spaces.Box(-1e6, 1e6, (2,), np.float32)
    space = spaces.Dict({"achieved_goal": box, "desired_goal": box, "observation": box})

    def reward(achieved, desired, info):
        return -np.any(achieved != desired, axis=-1).astype(np.float32)

    buffer = HerReplayBuffer(capacity, space, 1, n_envs, reward, strategy=strategy, n_sampled_goal=4)
    rng = np.random.default_rng(seed)
    ids = np.arange(n_envs, dtype=np.float64) * 1000
    t = np.zeros(n_envs)
    limits = rng.integers(1, 12, n_envs)
    lengths: dict[float, int] = {}

    def raw(ep, step):
        return {"observation": np.stack([ep, step], 1), "achieved_goal": np.stack([ep, step], 1),
                "desired_goal": np.full((n_envs, 2), SENTINEL)}

    for _ in range(capacity // n_envs * 3):  # the ring wraps around twice
        obs = raw(ids, t)
        dones = t + 1 >= limits
        nxt_ids, nxt_t = np.where(dones, ids + 1, ids), np.where(dones, 0, t + 1)
        new_obs = raw(nxt_ids, nxt_t)
        last = raw(ids, t + 1)
        infos = [{"terminal_observation": {k: v[i] for k, v in last.items()}, "TimeLimit.truncated": bool(i % 2)}
                 if dones[i] else {} for i in range(n_envs)]
        buffer.store(obs, None, np.zeros((n_envs, 1)), np.full(n_envs, -1.0), new_obs, None, dones, infos)
        for i in np.flatnonzero(dones):
            lengths[float(ids[i])] = int(limits[i])
        limits = np.where(dones, rng.integers(1, 12, n_envs), limits)
        ids, t = nxt_ids, nxt_t
    return buffer, lengths, set(ids.tolist())


@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_goals_come_from_the_same_episode_and_never_from_its_past(strategy):
    buffer, lengths, in_flight = _synthetic_buffer(strategy)
    batch = buffer.sample(20_000, np.random.default_rng(1))
    obs, nxt, goal = batch["obs"]["observation"], batch["next_obs"]["observation"], batch["obs"]["desired_goal"]
    episode, t = obs[:, 0], obs[:, 1]
    # interleaved envs kept apart: every stored next observation is the same episode's next step
    np.testing.assert_array_equal(nxt[:, 0], episode)
    np.testing.assert_array_equal(nxt[:, 1], t + 1)
    assert not set(episode.tolist()) & in_flight  # only complete episodes are sampled
    length = np.array([lengths[e] for e in episode])
    assert np.all(t < length)
    relabelled = goal[:, 0] != SENTINEL
    assert 0.78 < relabelled.mean() < 0.82  # n_sampled_goal=4: 4/5 relabelled
    assert np.all(goal[relabelled, 0] == episode[relabelled])  # never another episode's goal
    goal_t = goal[relabelled, 1]
    if strategy == "future":
        assert np.all(goal_t >= t[relabelled] + 1)  # achieved at or after this transition's step
        assert np.any(goal_t > t[relabelled] + 1)
    elif strategy == "final":
        np.testing.assert_array_equal(goal_t, length[relabelled])
    else:
        assert np.all(goal_t >= 1) and np.any(goal_t < t[relabelled] + 1)
    assert np.all(goal_t <= length[relabelled])
    np.testing.assert_array_equal(batch["rewards"][relabelled], -(goal_t != t[relabelled] + 1).astype(np.float32))
    assert np.all(batch["rewards"][~relabelled] == -1.0)


def test_truncation_bootstraps_and_termination_does_not():
    """Envs 0 and 2 end their episodes by termination, 1 and 3 by truncation (``_synthetic_buffer``)."""
    buffer, lengths, _ = _synthetic_buffer("future")
    batch = buffer.sample(5000, np.random.default_rng(2))
    episode, t = batch["obs"]["observation"][:, 0], batch["obs"]["observation"][:, 1]
    last = t + 1 == np.array([lengths[e] for e in episode])
    terminated_env = (episode // 1000) % 2 == 0
    assert (last & terminated_env).any() and (last & ~terminated_env).any()
    np.testing.assert_array_equal(batch["dones"], (last & terminated_env).astype(np.float32))


def test_the_ring_forgets_overwritten_episodes():
    buffer, _, _ = _synthetic_buffer("future", capacity=200)
    assert 0 < len(buffer) <= 200 and len(buffer) == int((buffer.ep_length > 0).sum())
    batch = buffer.sample(5000, np.random.default_rng(3))
    episode = batch["obs"]["observation"][:, 0]
    goal = batch["obs"]["desired_goal"]
    relabelled = goal[:, 0] != SENTINEL
    assert np.all(goal[relabelled, 0] == episode[relabelled])
    # every sampled episode is whole in the buffer: its first step is still stored
    stored = {(o[0], o[1]) for o in buffer.obs["observation"].reshape(-1, 2)}
    assert all((e, 0.0) in stored for e in set(episode.tolist()))


def test_an_episode_cut_by_a_restart_keeps_its_own_goals():
    """A resumed run whose envs could not be restored starts new episodes: the one in flight ends there (as a
    truncated episode) instead of running on into the next one."""
    box = spaces.Box(-1e6, 1e6, (2,), np.float32)
    space = spaces.Dict({"achieved_goal": box, "desired_goal": box, "observation": box})
    buffer = HerReplayBuffer(100, space, 1, 1, lambda a, d, i: -np.any(a != d, axis=-1).astype(np.float32),
                             strategy="future", n_sampled_goal=4)

    def step(episode: float, t: int, done: bool) -> None:
        def raw(s):
            return {"observation": np.array([[episode, s]]), "achieved_goal": np.array([[episode, s]]),
                    "desired_goal": np.full((1, 2), SENTINEL)}
        info = {"terminal_observation": {k: v[0] for k, v in raw(t + 1).items()}, "TimeLimit.truncated": True}
        buffer.store(raw(t), None, np.zeros((1, 1)), np.full(1, -1.0), raw(0 if done else t + 1), None,
                     np.array([done]), [info if done else {}])

    for t in range(3):  # episode 1: three steps, then the run stops
        step(1.0, t, False)
    assert len(buffer) == 0
    buffer.restart()
    assert len(buffer) == 3  # a complete episode of three steps
    for t in range(5):  # episode 2 after the resume
        step(2.0, t, t == 4)
    batch = buffer.sample(4000, np.random.default_rng(0))
    episode, t = batch["obs"]["observation"][:, 0], batch["obs"]["observation"][:, 1]
    relabelled = batch["obs"]["desired_goal"][:, 0] != SENTINEL
    assert np.all(batch["obs"]["desired_goal"][relabelled, 0] == episode[relabelled])  # never the other episode's
    assert np.all(batch["obs"]["desired_goal"][relabelled & (episode == 1.0), 1] <= 3)
    assert np.all(batch["dones"] == 0.0)  # its last step bootstraps: the episode was cut, not terminated
    assert set(t[episode == 1.0].tolist()) == {0.0, 1.0, 2.0}


@pytest.mark.parametrize("base, model_class", [("td3", "HerTD3Model"), ("tqc", "HerTQCModel")])
def test_her_on_another_base_saves_and_loads(base, model_class, tmp_path):
    """A short her run on td3 or tqc saves a her file that loads as the same class with the same actions (the
    contract test plays her files from the command line)."""
    from algos.base import load_model
    from algos.her.her import learn

    venv = make_vec_env("BitFlipping-v0", "envs", 2, 0, env_kwargs={"n_bits": 4}, flatten_dict_observations=False)
    model = learn(env=venv, total_timesteps=300, seed=0, her_algorithm=base, learning_starts=100, num_hidden=16,
                  train_freq=50, gradient_steps=2, log_interval=100)
    obs = venv.reset()
    venv.close()
    path = str(tmp_path / "her.zip")
    model.save(path)
    loaded = load_model(path)
    assert type(loaded).__name__ == model_class and loaded.hyperparameters["her_algorithm"] == base
    assert loaded.observation_space == venv.observation_space  # the Dict structure travels in the file
    np.testing.assert_array_equal(loaded.predict(obs)[0], model.predict(obs)[0])


def test_her_refuses_a_non_goal_env():
    from algos.her.her import learn
    from common.errors import ConfigError

    venv = make_vec_env("IdentityBox-v0", "envs", 1, 0)
    with pytest.raises(ConfigError, match="goal env's Dict observation"):
        learn(env=venv, total_timesteps=100, seed=0)
    venv.close()


def test_fetch_without_gymnasium_robotics_is_one_line(monkeypatch):
    import run_util

    monkeypatch.setitem(sys.modules, "gymnasium_robotics", None)  # import fails as when not installed
    if "FetchReach-v4" in gym.registry:
        monkeypatch.delitem(gym.registry, "FetchReach-v4")
    with pytest.raises(run_util.UsageError, match=r"pip install -r requirements-robotics\.txt"):
        run_util.get_env_type("FetchReach-v4")


@pytest.mark.slow
def test_her_learns_bit_flipping_8_bits():
    """her+sac solves 8-bit flipping (continuous actions) in 10k steps: deterministic success >= 0.9 over 50
    episodes (a random policy succeeds with probability ~ 8 / 2^8 per episode)."""
    from algos.her.her import learn
    from runner.evaluation import evaluate

    venv = make_vec_env("BitFlipping-v0", "envs", 1, 0, env_kwargs={"n_bits": 8}, flatten_dict_observations=False)
    model = learn(env=venv, total_timesteps=10_000, seed=0, train_freq=50, gradient_steps=25, log_interval=10**6)
    venv.close()
    eval_venv = make_vec_env("BitFlipping-v0", "envs", 1, 100, env_kwargs={"n_bits": 8},
                             flatten_dict_observations=False)
    result = evaluate(model, eval_venv, 50)
    eval_venv.close()
    assert result.success_rate >= 0.9, result.summary()


def test_play_and_evaluation_report_the_success_rate():
    """An oracle that flips exactly the differing bits succeeds in every episode, one that flips nothing
    in none (whose goal differs from its start); both counts reach the summaries."""
    from runner.evaluation import evaluate
    from runner.play import play

    class Oracle:
        def __init__(self, act: bool):
            self.act = act

        def initial_state(self, n):
            return None

        def predict(self, obs, state=None, episode_start=None, deterministic=True):
            differ = obs["achieved_goal"] != obs["desired_goal"]
            return np.where(differ & self.act, 1.0, -1.0).astype(np.float32), None

    venv = make_vec_env("BitFlipping-v0", "envs", 2, 0, env_kwargs={"n_bits": 6}, flatten_dict_observations=False)
    lines: list[str] = []
    result = play(Oracle(True), venv, episodes=4, out=lines.append)
    assert result.successes == [True] * 4 and "success rate 1 (4/4)" in lines[-1]
    idle = evaluate(Oracle(False), venv, 6)
    venv.close()
    assert idle.success_rate == 0.0 and "success rate 0 (0/6)" in idle.summary()


def test_evaluations_csv_has_a_success_rate_column_for_goal_envs(tmp_path, monkeypatch):
    import csv

    from runner import evaluation

    results = iter([evaluation.EvalResult([-3.0], [4], 0.01, [False]), evaluation.EvalResult([-1.0], [4], 0.01, [True])])
    monkeypatch.setattr(evaluation, "evaluate", lambda *a, **k: next(results))

    class Model:
        def save(self, path):
            pass

    ev = evaluation.Evaluator(env=None, every=10, episodes=1, log_dir=str(tmp_path))
    ev.run(Model(), 10)
    ev.run(Model(), 20)
    with open(tmp_path / "evaluations.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["success_rate"]) for r in rows] == [0.0, 1.0]


def test_the_farama_notice_of_gymnasium_robotics_is_hidden_unless_verbose(monkeypatch, tmp_path, capfd):
    """A stand-in gymnasium_robotics prints its Farama notice at import, as 1.4.2 does."""
    from farama_notifications import notifications

    from common.robotics_envs import register_robotics_envs

    package = tmp_path / "gymnasium_robotics"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import sys\nfrom farama_notifications import notifications\n"
        "print(notifications.get('gymnasium_robotics', {}).get('0.0'), file=sys.stderr)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(notifications, "gymnasium_robotics", {"0.0": "NOTICE ABOUT ADROIT"})
    for verbose, shown in (("", False), ("1", True)):
        monkeypatch.setenv("RUNNER_VERBOSE", verbose)
        monkeypatch.delitem(sys.modules, "gymnasium_robotics", raising=False)
        assert register_robotics_envs()
        assert ("NOTICE ABOUT ADROIT" in capfd.readouterr().err) is shown
        assert notifications["gymnasium_robotics"] == {"0.0": "NOTICE ABOUT ADROIT"}  # put back

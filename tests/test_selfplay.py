"""Self-play: tic-tac-toe and its minimax player, the single-agent view (seats, opponents, masks), opponents'
numpy weight copies, the snapshot pool, Elo ratings, ``--self_play`` runs and ``--play --opponent``."""
from __future__ import annotations

import csv
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401 - registers TicTacToe-v0
from algos.selfplay.pool import SnapshotPool
from algos.selfplay.snapshot import policy_weights
from common.errors import ConfigError, UserError
from common.games.match import play_match
from common.games.players import HumanPlayer, PolicyPlayer, RandomPlayer
from common.games.ratings import fit_elo
from common.games.self_play_env import SelfPlayEnv
from common.vec_env import DummyVecEnv, SubprocVecEnv
from envs.tictactoe import MinimaxPlayer, TicTacToe, minimax_values

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ppo2_model(seed: int = 0):
    from algos.ppo2.model import PPO2Model

    game = TicTacToe()
    return PPO2Model(game.observation_space, game.action_space, network="mlp", seed=seed)


def test_tictactoe_rules_and_observation_perspective() -> None:
    g = TicTacToe()
    g.reset()
    assert g.current_player() == 0 and g.legal_moves().all()
    g.play(4)  # X in the centre
    assert g.current_player() == 1 and not g.legal_moves()[4]
    assert g.observe(0)[4] == 1 and g.observe(0)[9 + 4] == 0  # X's own plane
    assert g.observe(1)[4] == 0 and g.observe(1)[9 + 4] == 1  # O sees it as the opponent's
    for move in (0, 3, 1):
        rewards, over = g.play(move)
        assert not over and not rewards.any()
    rewards, over = g.play(5)  # X: 4, 3, 5 -> row 3-4-5
    assert over and list(rewards) == [1.0, -1.0]
    with pytest.raises(ValueError):
        g.play(8)


def test_minimax_is_perfect() -> None:
    assert max(minimax_values((0,) * 9)) == 0  # tic-tac-toe is a draw
    rng = np.random.default_rng(0)
    assert play_match(TicTacToe, MinimaxPlayer(), MinimaxPlayer(), 60, rng).totals[1] == 60
    assert play_match(TicTacToe, MinimaxPlayer(), RandomPlayer(), 300, rng).totals[2] == 0


def test_seats_alternate_over_episodes_and_envs() -> None:
    env = gym.make("TicTacToe-v0").unwrapped
    seats = []
    for k in range(6):
        obs, info = env.reset(seed=7 if k == 0 else None)
        seats.append(info["seat"])
        moved = int(obs.sum())
        assert moved == info["seat"]  # second player: the opponent has already made its first move
        assert int(obs[9:].sum()) == info["seat"] and env.action_masks().sum() == 9 - moved
        assert (info["action_mask"] == env.action_masks()).all()
    assert seats == [1, 0, 1, 0, 1, 0]
    venv = DummyVecEnv([lambda: gym.make("TicTacToe-v0") for _ in range(2)])
    venv.seed(10)
    venv.reset()
    assert venv.get_attr("seat") == [0, 1]  # envs seeded 10 and 11 start in different seats
    venv.close()


def test_illegal_move_ends_the_episode_as_a_loss() -> None:
    env = SelfPlayEnv(TicTacToe)
    env.reset(seed=1)  # seed 1: the learner plays second, one cell is taken
    taken = int(np.flatnonzero(~env.action_masks())[0])
    _, reward, terminated, _, info = env.step(taken)
    assert terminated and reward == -1.0 and info["illegal_move"]
    assert env.take_outcomes() == {"random": [0, 0, 1]} and env.illegal_moves == 1


def test_opponents_never_see_the_learners_live_weights() -> None:
    """A snapshot sent to the workers keeps acting the same after the learner's weights change."""
    model = _ppo2_model()
    obs = np.random.default_rng(0).integers(0, 2, (32, 18)).astype(np.float32)
    weights = policy_weights(model)
    before = weights.logits(obs).copy()
    venvs = [DummyVecEnv([lambda: SelfPlayEnv(TicTacToe)]),
             SubprocVecEnv([lambda: SelfPlayEnv(TicTacToe)])]
    try:
        for venv in venvs:
            venv.env_method("set_opponent_pool", [("0", weights)])
        for var in model.variables:  # train the learner: here, overwrite every weight
            var.assign(np.random.default_rng(1).normal(size=var.shape).astype(np.float32))
        model.policy.sync()
        assert not np.allclose(policy_weights(model).logits(obs), before)
        assert np.array_equal(weights.logits(obs), before)
        for venv in venvs:
            pool = venv.get_attr("pool")[0]
            assert np.array_equal(pool[0].weights.logits(obs), before)
    finally:
        for venv in venvs:
            venv.close()


def test_numpy_copy_acts_as_the_model() -> None:
    """The opponents' numpy forward pass gives the model's own logits."""
    model = _ppo2_model(3)
    obs = np.random.default_rng(0).integers(0, 2, (16, 18)).astype(np.float32)
    params, _, _ = model.policy.step(model.policy.encoder(obs))
    np.testing.assert_allclose(policy_weights(model).logits(obs), params, rtol=1e-5, atol=1e-6)


def test_board_cnn_numpy_copy_acts_as_the_model_and_as_tensorflow() -> None:
    """A board_cnn policy acts in numpy; its opponents' copy gives the same logits as its TF graph."""
    from gymnasium import spaces

    from algos.ppo2.model import PPO2Model

    board, moves = spaces.Box(0, 1, (6, 7, 2), np.int8), spaces.Discrete(7)
    model = PPO2Model(board, moves, network="board_cnn", seed=2,
                      network_kwargs={"convs": [(8, 4, 1), (6, 2, 1)], "num_hidden": 16})
    assert model.policy.numpy_acting
    for var in model.variables:  # weights of every sign, so each ReLU matters
        var.assign(np.random.default_rng(3).normal(size=var.shape).astype(np.float32) * 0.3)
    model.policy.sync()
    obs = np.random.default_rng(0).integers(0, 2, (16, 6, 7, 2)).astype(np.float32)
    numpy_params, _, _ = model.policy.step(obs)
    tf_params = model.policy.policy_params(obs).numpy()
    np.testing.assert_allclose(numpy_params, tf_params, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(policy_weights(model).logits(obs), tf_params, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("deterministic, epsilon", [(False, 0.0), (True, 0.5)])
def test_policy_player_never_plays_an_illegal_move(deterministic, epsilon) -> None:
    player = PolicyPlayer(policy_weights(_ppo2_model()), deterministic, epsilon=epsilon)
    game, rng = TicTacToe(), np.random.default_rng(0)
    for _ in range(30):
        game.reset()
        over = False
        while not over:
            mask = game.legal_moves()
            move = player.act(game, game.observe(game.current_player()), mask, rng)
            assert mask[move]
            _, over = game.play(move)


def test_pool_is_bounded_and_sampled_as_asked() -> None:
    w = policy_weights(_ppo2_model())
    pool = SnapshotPool(3, "latest")
    for t in range(5):
        pool.add(t * 100, w)
    assert pool.names() == ["200", "300", "400"]
    assert list(pool.probs()) == [0, 0, 1]
    pool.sampling = "uniform"
    assert np.allclose(pool.probs(), 1 / 3)
    pool.sampling = "prioritised"
    pool.record(np.array([[0, 0, 10], [10, 0, 0], [5, 0, 5]]))  # snapshot 200 beats the learner, 300 never
    p = pool.probs()
    assert p[0] > p[2] > p[1] and np.isclose(p.sum(), 1)
    with pytest.raises(ConfigError):
        SnapshotPool(3, "newest")


def test_env_draws_pool_opponents_with_the_given_chances() -> None:
    w = policy_weights(_ppo2_model())
    env = SelfPlayEnv(TicTacToe)
    env.set_opponent_pool([("a", w), ("b", w)], [0.8, 0.2])
    env.reset(seed=0)
    drawn = []
    for _ in range(1000):
        env.reset()
        drawn.append(env.seated[1 - env.seat].name)
    assert 0.75 < drawn.count("a") / 1000 < 0.85
    env.set_opponent_pool([("a", w), ("b", w)], [0.8, 0.2], fixed_share=0.5)  # half the games: a random player
    names = []
    for _ in range(1000):
        env.reset()
        names.append(env.seated[1 - env.seat].name)
    assert 0.45 < names.count("random") / 1000 < 0.55 and 0.35 < names.count("a") / 1000 < 0.45
    env.set_opponent_pool([("a", w), ("b", w)], [0.0, 1.0])
    rng = np.random.default_rng(0)
    for _ in range(20):
        _, info = env.reset()
        done = False
        while not done:
            _, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
    results = env.take_outcomes()
    assert set(results) == {"b"} and sum(results["b"]) == 20 and env.take_outcomes() == {}


def test_elo_fits_known_odds() -> None:
    r = fit_elo(["random", "a"], [(1, 0, 75.0, 100.0)], anchor=0, prior_games=1e-3)
    assert r[0] == 0 and 185 < r[1] < 197  # 75% expected score is 191 Elo points


def test_self_play_run_writes_ratings_and_logs(tmp_path) -> None:
    import run

    run.main(["--alg=ppo2", "--env=TicTacToe-v0", "--num_env=2", "--vec_env=subproc", "--num_timesteps=1024",
              "--nsteps=128", "--self_play", "--snapshot_freq=256", "--pool_size=3", "--eval_freq=512",
              "--selfplay_eval_games=20", f"--log_path={tmp_path}", "--log_format=csv", "--seed=0",
              f"--save_path={tmp_path / 'model.zip'}"])
    with open(tmp_path / "ratings.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {"512", "1024"} <= {r["snapshot"] for r in rows}
    assert (tmp_path / "ratings.png").stat().st_size > 0
    with open(tmp_path / "progress.csv", encoding="utf-8") as f:
        logged = [r for r in csv.DictReader(f) if r.get("selfplay/random_win")]
    assert logged and all(float(r["selfplay/pool_size"]) == 3 for r in logged[-1:])


def test_masked_learner_never_plays_an_illegal_move() -> None:
    """The env's masks reach ppo2 (common.wrappers.action_mask): no illegal move in training."""
    from runner.env_factory import make_vec_env

    env = make_vec_env("TicTacToe-v0", "envs", 4, seed=0, vec_env_kind="dummy", logger_dir="")
    try:
        from algos.ppo2 import ppo2

        ppo2.learn(env=env, total_timesteps=2048, seed=0, nsteps=64, self_play=True, snapshot_freq=512)
        assert env.get_attr("illegal_moves") == [0, 0, 0, 0]
        assert sum(sum(sum(v) for v in o.values()) for o in env.env_method("take_outcomes")) == 0  # all read
    finally:
        env.close()


def test_self_play_refuses_an_env_that_is_not_a_game(tmp_path) -> None:
    import run

    with pytest.raises(ConfigError, match="needs a game env"):
        run.main(["--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=256", "--nsteps=128", "--self_play",
                  f"--log_path={tmp_path}"])
    with pytest.raises(ConfigError, match="random_first_move must be at most 1"):
        run.main(["--alg=ppo2", "--env=TicTacToe-v0", "--num_timesteps=256", "--nsteps=128", "--self_play",
                  "--random_first_move=1.5", f"--log_path={tmp_path / 'b'}"])


def test_human_player_refuses_illegal_moves() -> None:
    import io

    game = TicTacToe()
    game.reset()
    game.play(4)
    out = io.StringIO()
    player = HumanPlayer(io.StringIO("4\nx\n9\n0\n"), out)
    assert player.act(game, game.observe(1), game.legal_moves(), np.random.default_rng()) == 0
    assert out.getvalue().count("illegal move") == 3 and " X " in out.getvalue()


def test_play_against_a_human_on_piped_stdin(tmp_path) -> None:
    model = _ppo2_model()
    path = str(tmp_path / "model.zip")
    model.save(path)
    moves = "".join(f"{m}\n" for m in ["42", *range(9)] * 20)  # refused, then every cell in turn until legal
    proc = subprocess.run([sys.executable, "-m", "run", "--env=TicTacToe-v0", "--num_timesteps=0",
                           f"--load_path={path}", "--play", "--opponent=human", "--play_episodes=2", "--no_render",
                           f"--log_path={tmp_path / 'logs'}"], input=moves, capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "illegal move '42'" in proc.stdout
    assert proc.stdout.count("your move") >= 2 and "played 2 episodes" in proc.stdout
    assert sum(proc.stdout.count(w) for w in ("you win", "you lose", "draw")) == 2


def test_human_game_ends_with_its_last_episode_and_no_display_note(tmp_path) -> None:
    """``--play_episodes=1`` against a person, without a display: the board is text, so no display note; after
    the result the person is asked for no move of a next game (the model moves first here, so the game the
    vec env starts after it would open with the person's move)."""
    model = _ppo2_model()
    path = str(tmp_path / "model.zip")
    model.save(path)
    moves = "".join(f"{m}\n" for m in list(range(9)) * 10)  # every cell in turn until legal
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    proc = subprocess.run([sys.executable, "-m", "run", "--env=TicTacToe-v0", "--num_timesteps=0", "--seed=0",
                           f"--load_path={path}", "--play", "--opponent=human", "--play_episodes=1",
                           f"--log_path={tmp_path / 'logs'}"], input=moves, capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "no display" not in proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "X" in next(line for line in lines if "|" in line), proc.stdout  # the model opened the game
    end = next(i for i, line in enumerate(lines) if line in ("you win", "you lose", "draw"))
    assert [line.split(":")[0] for line in lines[end + 1:]] == ["episode 1", "played 1 episode"], lines[end:]


def test_play_against_another_model_file(tmp_path) -> None:
    import run

    path = str(tmp_path / "model.zip")
    _ppo2_model().save(path)
    run.main(["--env=TicTacToe-v0", "--num_timesteps=0", f"--load_path={path}", "--play", f"--opponent={path}",
              "--play_episodes=2", "--no_render", f"--log_path={tmp_path / 'logs'}"])
    with pytest.raises(UserError, match="not random, human or a model file"):
        run.main(["--env=TicTacToe-v0", "--num_timesteps=0", f"--load_path={path}", "--play",
                  "--opponent=nobody", "--no_render", f"--log_path={tmp_path / 'logs2'}"])


def test_epsilon_opponents_vary_their_moves() -> None:
    weights = policy_weights(_ppo2_model())
    game, rng = TicTacToe(), np.random.default_rng(0)
    game.reset()
    obs, mask = game.observe(0), game.legal_moves()
    best = PolicyPlayer(weights, deterministic=True)
    assert len({best.act(game, obs, mask, rng) for _ in range(50)}) == 1
    assert len({PolicyPlayer(weights, True, epsilon=1.0).act(game, obs, mask, rng) for _ in range(50)}) > 5


def test_random_first_move_varies_the_openings() -> None:
    """A deterministic pool opponent opens the same way; with random_first_move=1 its first move is random."""
    weights = policy_weights(_ppo2_model())
    env = SelfPlayEnv(TicTacToe)
    env.reset(seed=1)
    openings = {}
    for share in (0.0, 1.0):
        env.set_opponent_pool([("a", weights)], deterministic=True, random_first_move=share)
        seen = set()
        for _ in range(40):
            obs, info = env.reset()
            if info["seat"] == 1:
                seen.add(int(np.argmax(obs[9:])))
        openings[share] = seen
    assert len(openings[0.0]) == 1 and len(openings[1.0]) > 4


def test_random_opening_plays_the_learners_first_move_too() -> None:
    """With random_opening=1 the game's first move is random whoever's it is: as first player the learner first
    sees a varied own mark and the pool's reply; without it, an empty board."""
    weights = policy_weights(_ppo2_model())
    env = SelfPlayEnv(TicTacToe)
    env.reset(seed=0)
    for share in (0.0, 1.0):
        env.set_opponent_pool([("a", weights)], deterministic=True, random_opening=share)
        first_seat = [obs for obs, info in (env.reset() for _ in range(40)) if info["seat"] == 0]
        assert {int(o.sum()) for o in first_seat} == ({0} if share == 0.0 else {2})
        if share:
            assert len({int(np.argmax(o[:9])) for o in first_seat}) > 4  # the learner's own opening varies


def test_pool_state_round_trip() -> None:
    """A checkpoint's pool (fixed-size slots) gives back the same snapshots, results and weights."""
    model = _ppo2_model(3)
    pool = SnapshotPool(4, "prioritised")
    first = policy_weights(model)
    pool.add(0, first)
    for var in model.variables:
        var.assign(var.numpy() + 0.5)
    model.policy.sync()
    pool.add(256, policy_weights(model))
    pool.record(np.array([[1.0, 2.0, 3.0], [4.0, 0.0, 1.0]]))
    restored = SnapshotPool(4, "prioritised")
    restored.load_state(pool.state(first), first)
    assert restored.names() == ["0", "256"]
    np.testing.assert_array_equal(restored.probs(), pool.probs())
    obs = np.random.default_rng(0).integers(0, 2, (8, 18)).astype(np.float32)
    for a, b in zip(pool.snapshots, restored.snapshots):
        np.testing.assert_array_equal(a.weights.logits(obs), b.weights.logits(obs))


def test_self_play_run_resumes_with_its_pool(tmp_path) -> None:
    """Killed after a checkpoint and resumed, a self-play run continues with the pool it had."""
    import run

    log = tmp_path / "log"
    argv = ["--alg=ppo2", "--env=TicTacToe-v0", "--num_env=2", "--num_timesteps=1024", "--nsteps=128",
            "--self_play", "--snapshot_freq=256", "--pool_size=5", "--checkpoint_freq=512", f"--log_path={log}",
            "--log_format=csv", "--seed=0", "--no_progress", f"--save_path={tmp_path / 'model.zip'}"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, os.path.join(root, "tests", "resume_crash.py"), "700", "--", *argv],
                          cwd=root, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == -9, proc.stderr[-2000:]
    model = run.main([f"--resume={log}", f"--save_path={tmp_path / 'model.zip'}"])
    assert model.num_timesteps == 1024
    with open(log / "progress.csv", encoding="utf-8") as f:
        sizes = [float(r["selfplay/pool_size"]) for r in csv.DictReader(f) if r.get("selfplay/pool_size")]
    assert sizes[-1] == 5  # snapshots 0, 256 and 512 came back (a fresh pool would hold 0, 768, 1024)


def test_sampled_moves_follow_the_masked_softmax() -> None:
    from common.games.players import masked_choice

    logits = np.array([0.5, 1.0, -0.3, 2.0, 0.0, 0.1, -1.0])
    mask = np.array([1, 1, 1, 0, 1, 1, 1], bool)
    rng = np.random.default_rng(0)
    freq = np.bincount([masked_choice(logits, mask, rng, False) for _ in range(20000)], minlength=7) / 20000
    p = np.exp(logits - logits.max()) * mask
    assert freq[3] == 0 and np.abs(freq - p / p.sum()).max() < 0.015
    assert masked_choice(logits, mask, rng, True) == 1  # the best legal move

"""Symmetry augmentation (ppo2 ``augment_symmetries``): tic-tac-toe's symmetries map positions, moves and
masks onto positions, moves and masks of the same worth; the augmented batch holds every copy with its
original's return, value and log-probability; one-line errors."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401 - registers TicTacToe-v0
from algos.on_policy.symmetries import augment, env_symmetries
from algos.ppo2.ppo2 import _with_symmetric_copies
from common.errors import ConfigError
from common.vec_env import DummyVecEnv
from envs.tictactoe import TicTacToe, minimax_values


def _positions(count: int, rng: np.random.Generator) -> list[TicTacToe]:
    """Positions of random games, none finished."""
    out = []
    while len(out) < count:
        game, over = TicTacToe(), False
        for _ in range(int(rng.integers(0, 8))):
            _, over = game.play(int(rng.choice(np.flatnonzero(game.legal_moves()))))
            if over:
                break
        if not over:
            out.append(game)
    return out


def test_tictactoe_symmetries_map_positions_moves_and_masks() -> None:
    """Each transformed observation is the observation of the transformed board, the transformed mask its
    legal moves, and each move keeps its minimax value."""
    rng = np.random.default_rng(0)
    vec = DummyVecEnv([lambda: gym.make("TicTacToe-v0")])
    symmetries = env_symmetries(vec)
    assert len(symmetries) == 7
    for game in _positions(60, rng):
        mover = game.current_player()
        obs, mask = game.observe(mover)[None], game.legal_moves()[None]
        values = np.asarray(minimax_values(tuple(game.board)))
        moves = np.flatnonzero(mask[0])
        for s in symmetries:
            turned = TicTacToe()
            turned.board = [game.board[c] for c in s.action_map.argsort()]  # cell j: its source cell
            turned.moves = game.moves
            obs_t, actions_t, mask_t = augment([s], obs, moves[:1], mask)
            np.testing.assert_array_equal(obs_t[0], turned.observe(mover))
            np.testing.assert_array_equal(mask_t[0], turned.legal_moves())
            turned_values = np.asarray(minimax_values(tuple(turned.board)))
            np.testing.assert_array_equal(turned_values[s.action_map[moves]], values[moves])
            assert actions_t[0] == s.action_map[moves[0]]
    vec.close()


def test_augmented_batch_holds_every_copy_with_its_originals_values_and_probabilities() -> None:
    rng = np.random.default_rng(1)
    positions = _positions(40, rng)
    obs = np.stack([g.observe(g.current_player()) for g in positions]).astype(np.float32)
    masks = np.stack([g.legal_moves() for g in positions])
    actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks], np.int64)
    returns, values, neglogps = (rng.normal(size=40).astype(np.float32) for _ in range(3))
    vec = DummyVecEnv([lambda: gym.make("TicTacToe-v0")])
    symmetries = env_symmetries(vec)
    vec.close()
    b_obs, b_actions, b_returns, b_values, b_neglogps, b_masks = _with_symmetric_copies(
        symmetries, obs, actions, returns, values, neglogps, masks)
    assert len(b_obs) == len(b_actions) == len(b_masks) == 8 * 40
    for column, original in ((b_returns, returns), (b_values, values), (b_neglogps, neglogps)):
        np.testing.assert_array_equal(column, np.tile(original, 8))
    np.testing.assert_array_equal(b_obs[:40], obs)
    assert b_masks[np.arange(len(b_actions)), b_actions].all()  # every copied move is legal in its copy
    assert len({o.tobytes() for o in b_obs[::40]}) > 1  # the copies are transformed


class _BadSymmetries(gym.Env):
    observation_space = gym.spaces.Box(0, 1, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def symmetries(self):
        return [(np.array([0, 0, 1]), np.array([1, 0]))]  # not a permutation of the observation


def test_envs_without_fitting_symmetries_are_refused() -> None:
    import run

    with pytest.raises(ConfigError, match="augment_symmetries: the env lists no symmetries"):
        run.main(["--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=256", "--nsteps=64", "--augment_symmetries=True"])
    vec = DummyVecEnv([_BadSymmetries])
    with pytest.raises(ConfigError, match="must permute the 3 observation entries"):
        env_symmetries(vec)
    vec.close()
    with pytest.raises(ConfigError, match="augment_symmetries: not for recurrent policies"):
        run.main(["--alg=ppo2", "--env=TicTacToe-v0", "--network=lstm", "--num_env=4", "--num_timesteps=256",
                  "--nsteps=64"])
    with pytest.raises(ConfigError, match="augment_symmetries permutes raw observations"):
        run.main(["--alg=ppo2", "--env=TicTacToe-v0", "--vec_normalize=True", "--num_timesteps=256", "--nsteps=64"])


def test_self_play_run_with_symmetries(tmp_path) -> None:
    import run

    model = run.main(["--alg=ppo2", "--env=TicTacToe-v0", "--self_play", "--augment_symmetries=True", "--num_env=2",
                      "--nsteps=64", "--num_timesteps=512", "--seed=0", f"--log_path={tmp_path}"])
    assert model.num_timesteps == 512

"""Self-play through the shared on-policy loop for a2c and trpo (ppo2's own tests are in test_selfplay.py):
the learner's seat alternates, snapshots join the pool and reach the env workers, the learner plays them;
and algorithms that cannot self-play refuse ``--self_play`` in one line."""
from __future__ import annotations

import itertools

import gymnasium as gym
import pytest

from common.errors import UserError
from common.games.self_play_env import SelfPlayEnv
from common.vec_env import DummyVecEnv
from envs.tictactoe import TicTacToe

STEPS, FREQ = 600, 100


class SeatLog(gym.Wrapper):
    """Records the learner's seat of every episode."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.seats: list[int] = []

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.seats.append(info["seat"])
        return obs, info


@pytest.mark.parametrize("alg, settings", [("a2c", {"nsteps": 5}), ("trpo", {"timesteps_per_batch": 40})])
def test_on_policy_self_play_alternates_seats_and_fills_the_pool(alg, settings) -> None:
    import importlib

    learn = importlib.import_module(f"algos.{alg}.{alg}").learn
    venv = DummyVecEnv([lambda: SeatLog(SelfPlayEnv(TicTacToe)) for _ in range(2)])
    venv.seed(0)
    try:
        model = learn(env=venv, total_timesteps=STEPS, seed=0, self_play=True, snapshot_freq=FREQ, pool_size=4,
                      **settings)
        assert model.num_timesteps == STEPS
        pool = venv.get_attr("pool")
        names = [p.name for p in pool[0]]
        assert len(names) == 4 and names == [p.name for p in pool[1]]  # bounded, the same in every env
        assert int(names[-1]) >= STEPS - 2 * FREQ and int(names[0]) > 0  # recent snapshots; "0" left the pool
        for env in venv.envs:
            seats = env.seats
            assert len(seats) > 20 and all(a != b for a, b in itertools.pairwise(seats))
    finally:
        venv.close()


@pytest.mark.parametrize("alg", ["deepq", "ddpg"])
def test_algorithms_that_cannot_self_play_say_so(alg, tmp_path) -> None:
    import run

    with pytest.raises(UserError, match=f"algorithm '{alg}' cannot self-play.*ppo2, a2c, trpo") as info:
        run.main([f"--alg={alg}", "--env=TicTacToe-v0", "--self_play", "--num_timesteps=100",
                  f"--log_path={tmp_path}"])
    assert "\n" not in str(info.value)

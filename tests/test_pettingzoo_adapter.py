"""The PettingZoo adapter (``common.games.pettingzoo``) against tiny AEC and parallel envs of our own
(``envs/pettingzoo_toys.py``), Connect Four through the runner, and the error without PettingZoo."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from common.games.match import play_match
from common.games.players import RandomPlayer
from common.games.self_play_env import SelfPlayEnv
from run_util import get_env_type

pytest.importorskip("pettingzoo")

from common.games.pettingzoo import INSTALL, AECGame, PettingZooMissing
from envs.pettingzoo_toys import NimAEC, PenniesParallel


def test_aec_game_turns_masks_and_rewards() -> None:
    game = AECGame(NimAEC(stones=3))
    assert game.num_players == 2 and game.action_space.n == 2 and game.observation_space.shape == (4,)
    game.reset(seed=0)
    assert game.current_player() == 0 and list(game.observe(0)) == [0, 0, 0, 1]
    assert game.play(0) == (pytest.approx([0, 0]), False)  # 2 left
    assert game.current_player() == 1 and game.legal_moves().all()
    game.play(0)  # 1 left: taking 2 is illegal now
    assert game.current_player() == 0 and list(game.legal_moves()) == [True, False]
    rewards, over = game.play(0)  # the first player takes the last stone
    assert over and list(rewards) == [1.0, -1.0]


def test_parallel_env_is_played_in_turns() -> None:
    game = AECGame(PenniesParallel())
    game.reset()
    assert game.play(1) == (pytest.approx([0, 0]), False)
    rewards, over = game.play(1)
    assert over and list(rewards) == [1.0, -1.0]  # both showed the same side: "even" wins
    result = play_match(lambda: AECGame(PenniesParallel()), RandomPlayer(), RandomPlayer(), 200,
                        np.random.default_rng(0))
    assert result.totals[1] == 0 and 60 < result.totals[0] < 140


def test_self_play_env_over_an_aec_game() -> None:
    env = SelfPlayEnv(lambda: AECGame(NimAEC(stones=5)))
    seats = []
    for k in range(4):
        obs, info = env.reset(seed=0 if k == 0 else None)
        seats.append(info["seat"])
        stones = int(np.argmax(obs))
        assert stones == 5 if env.seat == 0 else stones in (3, 4)  # second: the opponent took 1 or 2 first
        done = False
        while not done:
            obs, reward, done, _, info = env.step(0)
        assert reward in (1.0, -1.0)
    assert seats == [0, 1, 0, 1]
    assert sum(sum(v) for v in env.take_outcomes().values()) == 4


def test_missing_pettingzoo_is_one_line_saying_how_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pettingzoo", None)  # import pettingzoo now raises ImportError
    with pytest.raises(PettingZooMissing, match=INSTALL.replace(".", r"\.")) as info:
        get_env_type("pettingzoo.classic:connect_four_v3")
    assert "\n" not in str(info.value)


def test_unknown_pettingzoo_env_is_a_user_error() -> None:
    with pytest.raises(PettingZooMissing, match="no such PettingZoo env"):
        get_env_type("pettingzoo.classic:no_such_game_v1")


def test_connect_four_self_play_through_the_runner(tmp_path) -> None:
    pytest.importorskip("pygame")  # PettingZoo's classic games import it
    import run

    model = run.main(["--alg=ppo2", "--env=pettingzoo.classic:connect_four_v3", "--num_env=2", "--vec_env=dummy",
                      "--num_timesteps=256", "--nsteps=64", "--self_play", "--snapshot_freq=128",
                      f"--log_path={tmp_path}", "--seed=0"])
    assert model.num_timesteps == 256 and model.observation_space.shape == (6, 7, 2)
    assert model.policy.net.name == "board_cnn"  # the shipped entry's network, copied to numpy for the pool

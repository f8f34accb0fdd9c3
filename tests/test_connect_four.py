"""Connect Four: the one-step lookahead player (wins, blocks, legal moves only), the PettingZoo adapter's
fast path (the same games as through all of PettingZoo's wrappers, its own illegal-move check), and
``--opponent=lookahead``."""
from __future__ import annotations

import numpy as np
import pytest

from common.games.connect_four import LookaheadPlayer, fits, winning_moves
from common.games.match import play_match
from common.games.players import RandomPlayer

pytest.importorskip("pettingzoo")
pytest.importorskip("pygame")  # PettingZoo's classic games import it

from common.games.pettingzoo import AECGame, make_aec, make_game

SPEC = "pettingzoo.classic:connect_four_v3"


def board(rows: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(observation, mask) of a 6 x 7 board drawn top row first: X the mover's pieces, O the opponent's."""
    grid = np.array([list(r) for r in rows])
    obs = np.stack([grid == "X", grid == "O"], axis=-1).astype(np.float32)
    return obs, grid[0] == "."


EMPTY = "......."


def test_lookahead_takes_a_winning_move() -> None:
    obs, mask = board([EMPTY] * 5 + ["XXX.OO."])
    rng = np.random.default_rng(0)
    assert {LookaheadPlayer().act(None, obs, mask, rng) for _ in range(20)} == {3}
    # X's diagonal needs row 2 of column 3: a piece dropped there lands on row 3 until column 3 holds three
    diagonal, mask = board([EMPTY] * 3 + ["..X....", ".XOO...", "XOOO..."])
    assert winning_moves(diagonal[..., 0] > 0, diagonal[..., 1] > 0, mask) == []
    diagonal, mask = board([EMPTY] * 3 + ["..XO...", ".XOO...", "XOOO..."])
    assert winning_moves(diagonal[..., 0] > 0, diagonal[..., 1] > 0, mask) == [3]


def test_lookahead_blocks_and_prefers_winning_to_blocking() -> None:
    rng = np.random.default_rng(0)
    obs, mask = board([EMPTY] * 3 + ["..O....", "..O...X", "..O..XX"])  # O threatens column 2 vertically
    assert {LookaheadPlayer().act(None, obs, mask, rng) for _ in range(20)} == {2}
    obs, mask = board([EMPTY] * 3 + ["..O...X", "..O...X", "..O...X"])  # X wins in column 6 instead
    assert {LookaheadPlayer().act(None, obs, mask, rng) for _ in range(20)} == {6}
    obs, mask = board([EMPTY] * 5 + ["X......"])  # nothing to win or block: random among legal moves
    assert len({LookaheadPlayer().act(None, obs, mask, rng) for _ in range(60)}) == 7


def test_lookahead_plays_legal_moves_and_beats_a_random_player() -> None:
    """Whole games through the adapter, which raises on any illegal move; the lookahead wins most of them."""
    result = play_match(lambda: make_game(SPEC), LookaheadPlayer(), RandomPlayer(), 60, np.random.default_rng(1))
    assert result.games == 60 and result.rates()[0] > 0.8
    obs, mask = board(["XOX.OXO", "OXO.XOX", "XOX.OXO", "OXOXXOX", "XOXOOXO", "OXOXXOX"])
    assert LookaheadPlayer().act(None, obs, mask, np.random.default_rng(0)) == 3  # the one legal column


def test_fits_connect_four_boards_only() -> None:
    from envs.tictactoe import TicTacToe

    assert fits(make_game(SPEC).observation_space) and not fits(TicTacToe.observation_space)


def test_adapter_plays_the_same_games_as_through_all_wrappers() -> None:
    """The adapter steps under PettingZoo's checking wrappers; observations, masks and rewards are those of
    the fully wrapped env, move for move."""
    rng = np.random.default_rng(2)
    game, full = AECGame(make_aec(SPEC)), make_aec(SPEC)
    for seed in range(5):
        game.reset(seed=seed)
        full.reset(seed=seed)
        over = False
        while not over:
            agent = full.agent_selection
            expected = full.observe(agent)
            p = game.current_player()
            assert game.agents[p] == agent
            np.testing.assert_array_equal(game.observe(p), expected["observation"])
            np.testing.assert_array_equal(game.legal_moves(), expected["action_mask"].astype(bool))
            move = int(rng.choice(np.flatnonzero(expected["action_mask"])))
            rewards, over = game.play(move)
            full.step(move)
            np.testing.assert_array_equal(rewards, [full.rewards[a] for a in game.agents])
        assert all(full.terminations.values())


def test_adapter_refuses_an_illegal_move() -> None:
    game = make_game(SPEC)
    game.reset(seed=0)
    for _ in range(6):
        game.play(0)  # column 0 is full now
    with pytest.raises(ValueError, match="illegal move 0"):
        game.play(0)
    with pytest.raises(ValueError, match="illegal move 7"):
        game.play(7)


def test_play_against_the_lookahead_player(tmp_path, capsys) -> None:
    import run
    from common.errors import UserError

    path = str(tmp_path / "c4.zip")
    run.main(["--alg=ppo2", f"--env={SPEC}", "--num_env=2", "--vec_env=dummy", "--num_timesteps=128", "--nsteps=64",
              f"--save_path={path}", f"--log_path={tmp_path / 'train'}", "--seed=0"])
    run.main([f"--env={SPEC}", "--num_timesteps=0", f"--load_path={path}", "--play", "--opponent=lookahead",
              "--play_episodes=4", "--no_render", f"--log_path={tmp_path / 'play'}"])
    assert "episode" in capsys.readouterr().out.lower()
    with pytest.raises(UserError, match="lookahead plays Connect Four boards"):
        run.main(["--alg=ppo2", "--env=TicTacToe-v0", "--num_timesteps=0", f"--load_path={path}", "--play",
                  "--opponent=lookahead", "--no_render", f"--log_path={tmp_path / 'ttt'}"])


def test_lookahead_opponents_play_their_share_of_the_episodes() -> None:
    from common.games.pettingzoo import make_env

    env = make_env(SPEC)
    env.set_opponent_pool([], players=[(LookaheadPlayer(), 0.5)])  # no pool: the rest against a random player
    names = []
    for k in range(200):
        env.reset(seed=0 if k == 0 else None)
        names.append(next(p.name for p in env.seated if p is not None))
    assert set(names) == {"lookahead", "random"} and 70 < names.count("lookahead") < 130
    with pytest.raises(ValueError, match="sum to at most 1"):
        env.set_opponent_pool([], players=[(LookaheadPlayer(), 0.7), (RandomPlayer(), 0.7)])


def test_lookahead_opponents_need_connect_four_boards(tmp_path) -> None:
    import run
    from common.errors import ConfigError

    with pytest.raises(ConfigError, match="lookahead_opponents: .* plays Connect Four boards"):
        run.main(["--alg=ppo2", "--env=TicTacToe-v0", "--num_env=1", "--num_timesteps=256", "--nsteps=64",
                  "--self_play", "--lookahead_opponents=0.5", f"--log_path={tmp_path}"])


def _winning_moves_by_hand(pieces: np.ndarray, others: np.ndarray, mask: np.ndarray) -> list[int]:
    """Reference: drop a piece in each legal column and look for a line of four through it."""
    rows, columns = pieces.shape
    wins = []
    for column in np.flatnonzero(mask):
        empty = np.flatnonzero(~(pieces | others)[:, column])
        if not len(empty):
            continue
        board = pieces.copy()
        board[empty[-1], column] = True
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            for r in range(rows):
                for c in range(columns):
                    cells = [(r + k * dr, c + k * dc) for k in range(4)]
                    if (empty[-1], column) in cells and all(0 <= a < rows and 0 <= b < columns and board[a, b]
                                                            for a, b in cells):
                        wins.append(int(column))
    return sorted(set(wins))


def test_winning_moves_match_dropping_each_piece_by_hand() -> None:
    """Random positions of random games: the vectorised search finds exactly the columns that win now."""
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(300):
        mine, theirs = np.zeros((6, 7), bool), np.zeros((6, 7), bool)
        for move in range(int(rng.integers(4, 30))):
            column = int(rng.choice(np.flatnonzero(~(mine | theirs)[0])))
            row = np.flatnonzero(~(mine | theirs)[:, column])[-1]
            (mine if move % 2 == 0 else theirs)[row, column] = True
        mask = rng.random(7) < 0.8
        for a, b in ((mine, theirs), (theirs, mine)):
            assert winning_moves(a, b, mask) == _winning_moves_by_hand(a, b, mask)
            checked += bool(_winning_moves_by_hand(a, b, mask))
    assert checked > 30  # many positions had a winning move

"""Self-play benchmark on tic-tac-toe, Connect Four and three in a row for 3 or 4 players: train ppo2 with
``--self_play`` through the runner, then evaluate the final model's deterministic moves against a random player
and a reference player (tic-tac-toe: perfect minimax; Connect Four: one-step lookahead; three in a row: N-1
random players and N-1 of its own earlier snapshots), every game seat by seat; or compare the env-step rate of
self-play with ordinary training.

    nice -n 10 .venv/bin/python bench/selfplay.py [--seed 0] [--timesteps 300000] [--num_env 8] [--k=v ...]
    nice -n 10 .venv/bin/python bench/selfplay.py --game connect_four [--seed 0] [--timesteps 3000000] \
        [--eval_freq=250000] [--random_games 500] [--reference_games 100]
    nice -n 10 .venv/bin/python bench/selfplay.py --game three_in_a_row [--players 3] [--timesteps 300000] \
        [--eval_freq=100000] [--random_games 300] [--reference_games 300]
    nice -n 10 .venv/bin/python bench/selfplay.py --speed [--game connect_four] [--timesteps 100000] [--repeats 4]
    nice -n 10 .venv/bin/python bench/selfplay.py --game connect_four --evaluate LOG_DIR   # a run made before
    nice -n 10 .venv/bin/python bench/selfplay.py --env_speed    # CPU time per Connect Four move, no training

Prints the command it ran, the training time, and the results per seat; for Connect Four also the first
training-time evaluation that met the issue's targets (its env steps and seconds), and whether the snapshot
ratings rise (ratings.csv: the share of (earlier, later) pairs whose later snapshot is rated higher). Three in a
row keeps a model file every ``SNAPSHOT_STEPS`` env steps (``--save_interval``): its pool of earlier snapshots,
each seat of a game against the final model drawn from them (sampled moves, as in training).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

# the settings are hyperparams/ppo2.toml's entries [env."TicTacToe-v0"] and [env."connect_four_v3"]
TICTACTOE = ["--env=TicTacToe-v0"]
CONNECT_FOUR = ["--env=pettingzoo.classic:connect_four_v3"]
THREE_IN_A_ROW = ["--env=ThreeInARow-v0"]
GAMES = {"tictactoe": TICTACTOE, "connect_four": CONNECT_FOUR, "three_in_a_row": THREE_IN_A_ROW}
SNAPSHOT_STEPS = 20_000  # three in a row: env steps between the model files of the pool it is evaluated against
TARGETS = {"random": 0.97, "lookahead": 0.8}  # Connect Four: win rates as either seat


def train(args: argparse.Namespace, extra: list[str], self_play: bool, log_dir: str) -> tuple[float, float]:
    """Train through the runner; (seconds, last logged time/fps)."""
    import run

    if args.game == "three_in_a_row":
        extra = [f"--env_kwargs={{'num_players': {args.players}}}", f"--save_interval={SNAPSHOT_STEPS}",
                 "--keep_checkpoints=0", *extra]
    argv = ["--alg=ppo2", *GAMES[args.game], f"--num_env={args.num_env}", f"--num_timesteps={args.timesteps}",
            f"--seed={args.seed}", f"--log_path={log_dir}", "--log_format=csv", f"--save_path={log_dir}/model.zip",
            f"--vec_env={args.vec_env}", *(["--self_play"] if self_play else []), *extra]
    print("python -m run " + " ".join(argv), flush=True)
    from common.process.signals import termination_as_interrupt

    t0 = time.perf_counter()
    try:
        with termination_as_interrupt():  # SIGTERM: the runner saves the model, the bench evaluates it
            run.main(argv)
    except KeyboardInterrupt as e:
        print(f"training stopped ({e}): the model saved at the stop is evaluated", flush=True)
    seconds = time.perf_counter() - t0
    with open(os.path.join(log_dir, "progress.csv"), encoding="utf-8") as f:
        fps = [float(r["time/fps"]) for r in csv.DictReader(f) if r.get("time/fps")]
    return seconds, fps[-1]


def reference(game: str) -> tuple[object, object, str]:
    """(make_game, reference player, its name) of a benchmark game."""
    if game == "tictactoe":
        from envs.tictactoe import MinimaxPlayer, TicTacToe

        return TicTacToe, MinimaxPlayer(), "minimax"
    from functools import partial

    from common.games.connect_four import LookaheadPlayer
    from common.games.pettingzoo import make_game

    return partial(make_game, CONNECT_FOUR[0].partition("=")[2]), LookaheadPlayer(), "lookahead"


def evaluate(model_path: str, game: str, seed: int, random_games: int, reference_games: int) -> None:
    """Print the final model's results per seat against a random and the game's reference player."""
    from algos.base import load_model
    from algos.selfplay.snapshot import policy_weights
    from common.games.match import play_match
    from common.games.players import PolicyPlayer, RandomPlayer

    make_game, strong, strong_name = reference(game)
    me = PolicyPlayer(policy_weights(load_model(model_path)), deterministic=True)
    rng = np.random.default_rng(seed + 1)
    for name, opponent, games in (("random", RandomPlayer(), random_games), (strong_name, strong, reference_games)):
        t0 = time.perf_counter()
        r = play_match(make_game, me, opponent, 2 * games, rng)
        for seat in (0, 1):
            w, d, loss = r.by_seat[seat]
            print(f"vs {name}, seat {seat} ({'first' if seat == 0 else 'second'}): {games} games: "
                  f"win {w} draw {d} loss {loss} (win rate {w / games:.3f})", flush=True)
        if game == "tictactoe":  # the targets: no loss against random, >= 95% draws against minimax
            losses = max(r.by_seat[seat][2] for seat in (0, 1))
            met = losses == 0 if name == "random" else losses <= 0.05 * games
            print(f"  target {'no loss' if name == 'random' else '>= 95% draws'} in either seat: "
                  f"{'met' if met else 'NOT met'} ({time.perf_counter() - t0:.1f} s)", flush=True)
        elif name in TARGETS:
            met = r.worst_seat_win_rate >= TARGETS[name]
            print(f"  target win rate >= {TARGETS[name]} as either seat: {'met' if met else 'NOT met'} "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)


def n_player_report(log_dir: str, players: int, seed: int, random_games: int, pool_games: int) -> None:
    """Three in a row: the final model's best moves against ``players`` - 1 random players and against
    ``players`` - 1 of its own earlier snapshots (the run's model files, each seat drawn from them per game,
    sampled moves), games per seat with their wins, draws and losses."""
    import functools

    from algos.base import load_model
    from algos.selfplay.snapshot import policy_weights
    from common.games.match import play_match
    from common.games.players import PolicyPlayer, RandomPlayer
    from envs.three_in_a_row import ThreeInARow

    make_game = functools.partial(ThreeInARow, players)
    me = PolicyPlayer(policy_weights(load_model(os.path.join(log_dir, "model.zip"))), deterministic=True)
    folder = os.path.join(log_dir, "checkpoints")
    files = sorted((f for f in os.listdir(folder) if f.endswith(".zip")) if os.path.isdir(folder) else [],
                   key=lambda f: int(f.split(".")[0]) if f.split(".")[0].isdigit() else -1)
    files = files[:-1]  # the last model file is (nearly) the final model
    pool = [PolicyPlayer(policy_weights(load_model(os.path.join(folder, f))), False, f) for f in files]
    rng = np.random.default_rng(seed + 1)
    print(f"{players} players: an even player wins 1/{players} = {1 / players:.3f} of its games", flush=True)
    cases = [("random", RandomPlayer(), random_games)]
    if pool:
        cases.append((f"the pool of {len(pool)} earlier snapshots ({files[0]} .. {files[-1]})", pool, pool_games))
    else:
        print("no earlier snapshots (model files in checkpoints/): the run was shorter than "
              f"{2 * SNAPSHOT_STEPS} steps", flush=True)
    for name, opponents, games in cases:
        r = play_match(make_game, me, opponents, players * games, rng)
        w, d, loss = r.totals
        print(f"vs {players - 1} x {name}: {r.games} games: win {w} draw {d} loss {loss} "
              f"(win rate {w / r.games:.3f}, worst seat {r.worst_seat_win_rate:.3f})", flush=True)
        for seat in range(players):
            w, d, loss = r.by_seat[seat]
            print(f"  seat {seat}: {games} games: win {w} draw {d} loss {loss} (win rate {w / games:.3f})", flush=True)


def opening_replies(model_path: str) -> None:
    """Tic-tac-toe: the model's reply as second player to each of the nine openings, its probability, and
    whether it loses under perfect play (minimax)."""
    from algos.base import load_model
    from algos.selfplay.snapshot import policy_weights
    from common.wrappers.action_mask import masked_logits
    from envs.tictactoe import TicTacToe, minimax_values

    weights, replies = policy_weights(load_model(model_path)), []
    for opening in range(9):
        game = TicTacToe()
        game.play(opening)
        z = masked_logits(weights.logits(game.observe(1)[None])[0].astype(np.float64), game.legal_moves())
        p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        reply = int(np.argmax(p))
        losing = minimax_values(tuple(game.board))[reply] < 0
        replies.append(f"{opening}->{reply} ({p[reply]:.2f}{', loses' if losing else ''})")
    print("second-player replies to each opening (cell -> cell, probability): " + ", ".join(replies), flush=True)


def time_to_targets(log_dir: str) -> None:
    """Each training-time evaluation's worst-seat win rates, and the first that met the Connect Four targets
    (its seconds: ``time/time_elapsed`` of the log line after it, as evaluation lines carry no time)."""
    from common.logs.log_keys import SELFPLAY_WORST_SEAT, TIME_ELAPSED, TOTAL_TIMESTEPS

    with open(os.path.join(log_dir, "progress.csv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    first = None
    for i, r in enumerate(rows):
        if not r.get(SELFPLAY_WORST_SEAT["lookahead"]):
            continue
        seconds = next((float(x[TIME_ELAPSED]) for x in [*rows[i:], *rows[:i][::-1]] if x.get(TIME_ELAPSED)), 0.0)
        rates = {k: float(r[SELFPLAY_WORST_SEAT[k]]) for k in TARGETS}
        print(f"evaluation at {r[TOTAL_TIMESTEPS]} steps ({seconds:.0f} s): worst-seat win rate "
              f"vs random {rates['random']:.2f}, vs lookahead {rates['lookahead']:.2f}")
        if first is None and all(rates[k] >= v for k, v in TARGETS.items()):
            first = (r[TOTAL_TIMESTEPS], seconds)
    print(f"targets first met at {first[0]} steps, {first[1]:.0f} s (training-time evaluation)" if first
          else "targets not met at any training-time evaluation", flush=True)


def ratings_rise(log_dir: str) -> None:
    """Print ratings.csv and, over the learner at each training-time evaluation (the snapshots with most
    games), the share of (earlier, later) pairs in which the later is rated higher (Elo: it beats the
    earlier more than half the time)."""
    from common.logs.log_keys import SELFPLAY_ELO, TOTAL_TIMESTEPS

    path = os.path.join(log_dir, "ratings.csv")
    if not os.path.exists(path):
        print("no ratings.csv (no evaluations: pass --eval_freq=...)")
        return
    with open(path, encoding="utf-8") as f:
        text = f.read().strip()
    print(text)
    with open(os.path.join(log_dir, "progress.csv"), encoding="utf-8") as f:
        evaluated = {r[TOTAL_TIMESTEPS] for r in csv.DictReader(f) if r.get(SELFPLAY_ELO)}
    elo = [float(r["elo"]) for r in csv.DictReader(text.splitlines()) if r["timesteps"] in evaluated]
    pairs = [(a, b) for i, a in enumerate(elo) for b in elo[i + 1:]]
    rising = sum(b > a for a, b in pairs)
    print(f"ratings rise: over the {len(elo)} evaluations, the later learner is rated higher in {rising} of "
          f"{len(pairs)} pairs ({rising / max(len(pairs), 1):.2f})", flush=True)


def env_speed(moves: int = 20_000) -> None:
    """CPU microseconds per Connect Four move: PettingZoo's env through its own wrappers, the adapter
    (``AECGame``), and per learner step of ``SelfPlayEnv`` (the learner's move and the opponent's reply)."""
    from common.games.pettingzoo import AECGame, make_aec, make_env
    from common.games.players import PolicyPlayer, PolicyWeights
    from common.games.self_play_env import SelfPlayEnv

    spec, rng = CONNECT_FOUR[0].partition("=")[2], np.random.default_rng(0)

    def per_move(play_one_game: Callable[[], int]) -> float:
        n, t0 = 0, time.process_time()
        while n < moves:
            n += play_one_game()
        return (time.process_time() - t0) / n * 1e6

    wrapped, game = make_aec(spec), AECGame(make_aec(spec))

    def wrapped_game() -> int:
        env = wrapped
        env.reset(seed=int(rng.integers(2**31)))
        n = 0
        while not (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
            env.step(int(rng.choice(np.flatnonzero(env.observe(env.agent_selection)["action_mask"]))))
            n += 1
        return n

    def adapter_game() -> int:
        game.reset(seed=int(rng.integers(2**31)))
        n, over = 0, False
        while not over:
            game.observe(game.current_player())
            _, over = game.play(int(rng.choice(np.flatnonzero(game.legal_moves()))))
            n += 1
        return n

    def learner_game(env: SelfPlayEnv) -> int:
        _, info = env.reset()
        n, done = 0, False
        while not done:
            _, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
            n += 1
        return n

    print(f"PettingZoo {spec} through its wrappers: {per_move(wrapped_game):.0f} us per move", flush=True)
    print(f"the adapter (AECGame): {per_move(adapter_game):.0f} us per move", flush=True)
    env = make_env(spec)
    print(f"SelfPlayEnv, random opponent: {per_move(lambda: learner_game(env)):.0f} us per learner step")
    hidden = [w.astype(np.float32) for w in (rng.normal(0, 0.1, (84, 256)), np.zeros(256),
                                             rng.normal(0, 0.06, (256, 256)), np.zeros(256))]
    weights = PolicyWeights(hidden, 2, False, "tanh", rng.normal(0, 0.01, (256, 7)).astype(np.float32),
                            np.zeros(7, np.float32))
    env.set_opponent(PolicyPlayer(weights))
    print(f"SelfPlayEnv, 256x256 mlp policy opponent: {per_move(lambda: learner_game(env)):.0f} us per learner step")
    convs = ((rng.normal(0, 0.2, (4, 4, 2, 64)).astype(np.float32), np.zeros(64, np.float32), 1),
             (rng.normal(0, 0.1, (2, 2, 64, 64)).astype(np.float32), np.zeros(64, np.float32), 1))
    cnn = PolicyWeights([rng.normal(0, 0.05, (384, 256)).astype(np.float32), np.zeros(256, np.float32)], 1, False,
                        "relu", rng.normal(0, 0.01, (256, 7)).astype(np.float32), np.zeros(7, np.float32),
                        convs=convs, image_shape=(6, 7, 2))
    env.set_opponent(PolicyPlayer(cnn))
    print(f"SelfPlayEnv, board_cnn policy opponent: {per_move(lambda: learner_game(env)):.0f} us per learner step")
    from common.games.connect_four import LookaheadPlayer

    env.set_opponent(LookaheadPlayer())
    print(f"SelfPlayEnv, lookahead opponent: {per_move(lambda: learner_game(env)):.0f} us per learner step")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--game", choices=sorted(GAMES), default="tictactoe")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timesteps", type=int, default=300_000)
    p.add_argument("--num_env", type=int, default=8)
    p.add_argument("--vec_env", default="dummy")
    p.add_argument("--speed", action="store_true", help="env steps/s of self-play against ordinary training")
    p.add_argument("--repeats", type=int, default=1, help="--speed: pairs of runs (order alternating)")
    p.add_argument("--random_games", type=int, default=1000, help="games per seat against the random player")
    p.add_argument("--out", default=None, help="keep the run's log folder (and model.zip) here")
    p.add_argument("--reference_games", "--minimax_games", type=int, default=200,
                   help="games per seat against the reference player (minimax; Connect Four: lookahead; three in a "
                        "row: the pool of earlier snapshots)")
    p.add_argument("--evaluate", metavar="LOG_DIR", default=None,
                   help="no training: evaluate LOG_DIR/model.zip of an earlier (or stopped) run and read its logs")
    p.add_argument("--env_speed", action="store_true", help="CPU time per Connect Four move, without training")
    p.add_argument("--players", type=int, default=3, help="three in a row: players at the table (3 or 4)")
    args, extra = p.parse_known_args()
    if args.env_speed:
        env_speed()
        return
    if args.evaluate:
        report(args, args.evaluate)
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = args.out or tmp
        if args.speed:
            speed(args, extra, tmp)
            return
        seconds, fps = train(args, extra, True, tmp)
        print(f"trained {args.timesteps} steps in {seconds:.1f} s (time/fps {fps:.0f})", flush=True)
        report(args, tmp)


def speed(args: argparse.Namespace, extra: list[str], tmp: str) -> None:
    """Env steps/s of self-play over ordinary training (a random opponent, no ``--self_play``): ``--repeats``
    pairs, the order alternating from pair to pair (so a drift of the machine's speed does not favour one),
    each run's ``time/fps`` and CPU seconds of this process (the envs are in it: DummyVecEnv), and the median
    ratio; after a short warm-up run of each."""
    import resource

    warm_up = argparse.Namespace(**{**vars(args), "timesteps": 4096})
    for self_play in (False, True):  # imports and graph tracing, paid once per process, out of the figures
        train(warm_up, extra, self_play, os.path.join(tmp, f"warm{int(self_play)}"))
    ratios, cpu_ratios = [], []
    for pair in range(args.repeats):
        rates, cpu = {}, {}
        for self_play in ((False, True) if pair % 2 == 0 else (True, False)):
            log_dir = os.path.join(tmp, f"p{pair}sp{int(self_play)}")
            before = resource.getrusage(resource.RUSAGE_SELF)
            seconds, rates[self_play] = train(args, extra, self_play, log_dir)
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu[self_play] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            print(f"{'self-play' if self_play else 'ordinary (random opponent)'}: {seconds:.1f} s, "
                  f"time/fps {rates[self_play]:.0f}, {cpu[self_play]:.1f} CPU s", flush=True)
        ratios.append(rates[True] / rates[False])
        cpu_ratios.append(cpu[False] / cpu[True])
        print(f"pair {pair}: self-play / ordinary steps/s {ratios[-1]:.3f} (per CPU second {cpu_ratios[-1]:.3f})",
              flush=True)
    print(f"self-play / ordinary steps/s: median {np.median(ratios):.3f} over {len(ratios)} pairs "
          f"({', '.join(f'{r:.3f}' for r in ratios)}); per CPU second: median {np.median(cpu_ratios):.3f}")


def report(args: argparse.Namespace, log_dir: str) -> None:
    """The final model's games per seat, the time to the targets (Connect Four) and the ratings of a run."""
    if args.game == "three_in_a_row":
        n_player_report(log_dir, args.players, args.seed, args.random_games, args.reference_games)
        ratings_rise(log_dir)
        return
    evaluate(os.path.join(log_dir, "model.zip"), args.game, args.seed, args.random_games, args.reference_games)
    if args.game == "connect_four":
        time_to_targets(log_dir)
    else:
        opening_replies(os.path.join(log_dir, "model.zip"))
    ratings_rise(log_dir)


if __name__ == "__main__":
    main()

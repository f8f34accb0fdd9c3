"""Self-play benchmark on tic-tac-toe (and Connect Four): train ppo2 with ``--self_play`` through the
runner, then evaluate the final model's deterministic moves against a random player and a perfect (minimax)
player, every game seat by seat; or compare the env-step rate of self-play with ordinary training.

    nice -n 10 .venv/bin/python bench/selfplay.py [--seed 0] [--timesteps 300000] [--num_env 8] [--k=v ...]
    nice -n 10 .venv/bin/python bench/selfplay.py --speed [--timesteps 100000]

Prints the command it ran, the training time, and the results per seat.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

# tic-tac-toe settings used for the figures in bench/README.md
TICTACTOE = ["--env=TicTacToe-v0", "--ent_coef=0.03", "--nsteps=128", "--nminibatches=4", "--noptepochs=4",
             "--lr=lin_1e-3", "--gamma=1.0", "--snapshot_freq=20000", "--pool_size=20",
             "--random_opponents=0.2", "--random_first_move=0.5"]


def train(args: argparse.Namespace, extra: list[str], self_play: bool, log_dir: str) -> tuple[float, float]:
    """Train through the runner; (seconds, last logged time/fps)."""
    import run

    argv = ["--alg=ppo2", *TICTACTOE, f"--num_env={args.num_env}", f"--num_timesteps={args.timesteps}",
            f"--seed={args.seed}", f"--log_path={log_dir}", "--log_format=csv", f"--save_path={log_dir}/model.zip",
            f"--vec_env={args.vec_env}", *(["--self_play"] if self_play else []), *extra]
    print("python -m run " + " ".join(argv), flush=True)
    t0 = time.perf_counter()
    run.main(argv)
    seconds = time.perf_counter() - t0
    with open(os.path.join(log_dir, "progress.csv"), encoding="utf-8") as f:
        fps = [float(r["time/fps"]) for r in csv.DictReader(f) if r.get("time/fps")]
    return seconds, fps[-1]


def evaluate(model_path: str, seed: int, random_games: int, minimax_games: int) -> None:
    """Print the final model's results per seat against a random and a minimax player."""
    from algos.base import load_model
    from algos.selfplay.snapshot import policy_weights
    from common.games.match import play_match
    from common.games.players import PolicyPlayer, RandomPlayer
    from envs.tictactoe import MinimaxPlayer, TicTacToe

    me = PolicyPlayer(policy_weights(load_model(model_path)), deterministic=True)
    rng = np.random.default_rng(seed + 1)
    for name, opponent, games in (("random", RandomPlayer(), random_games), ("minimax", MinimaxPlayer(), minimax_games)):
        r = play_match(TicTacToe, me, opponent, 2 * games, rng)
        for seat in (0, 1):
            w, d, loss = r.by_seat[seat]
            print(f"vs {name}, seat {seat} ({'first' if seat == 0 else 'second'}): {games} games: "
                  f"win {w} draw {d} loss {loss}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timesteps", type=int, default=300_000)
    p.add_argument("--num_env", type=int, default=8)
    p.add_argument("--vec_env", default="dummy")
    p.add_argument("--speed", action="store_true", help="env steps/s of self-play against ordinary training")
    p.add_argument("--random_games", type=int, default=1000, help="games per seat against the random player")
    p.add_argument("--out", default=None, help="keep the run's log folder (and model.zip) here")
    p.add_argument("--minimax_games", type=int, default=200, help="games per seat against the minimax player")
    args, extra = p.parse_known_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = args.out or tmp
        if args.speed:
            rates = {}
            for self_play in (False, True):
                log_dir = os.path.join(tmp, f"sp{int(self_play)}")
                seconds, fps = train(args, extra, self_play, log_dir)
                rates[self_play] = fps
                print(f"{'self-play' if self_play else 'ordinary (random opponent)'}: {seconds:.1f} s, "
                      f"time/fps {fps:.0f}", flush=True)
            print(f"self-play / ordinary steps/s: {rates[True] / rates[False]:.3f}")
            return
        seconds, fps = train(args, extra, True, tmp)
        print(f"trained {args.timesteps} steps in {seconds:.1f} s (time/fps {fps:.0f})", flush=True)
        evaluate(os.path.join(tmp, "model.zip"), args.seed, args.random_games, args.minimax_games)
        ratings = os.path.join(tmp, "ratings.csv")
        if os.path.exists(ratings):
            with open(ratings, encoding="utf-8") as f:
                print(f.read().strip())


if __name__ == "__main__":
    main()

"""Why a Fetch pushing policy fails: `bench/her_failures.py MODEL [--env FetchPush-v4] [--episodes 100]`.

Plays ``--episodes`` deterministic episodes of a her model file (episode i from ``reset(seed=--seed + i)``)
and sorts every episode that does not end at the goal by where the object ended:

- off the table: the object fell (its height dropped more than 0.1 below where it started);
- near the goal: on the table within 0.15 of the goal (the success radius is 0.05);
- never moved: the object moved less than 0.01;
- elsewhere: the rest.

Prints the success rate, the count of each kind, and the mean start distance of the object from the goal for
successes and failures. Needs requirements-robotics.txt.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gymnasium as gym
import numpy as np

from algos.base import load_model
from common.robotics_envs import INSTALL_LINE, register_robotics_envs

KINDS = ("off the table", "near the goal", "never moved", "elsewhere")


def failure_kind(start_object: np.ndarray, end_object: np.ndarray, goal: np.ndarray) -> str:
    """The kind of a failed episode from the object's start and end positions and the goal."""
    if end_object[2] < start_object[2] - 0.1:
        return "off the table"
    if np.linalg.norm(end_object - goal) < 0.15:
        return "near the goal"
    if np.linalg.norm(end_object - start_object) < 0.01:
        return "never moved"
    return "elsewhere"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--env", default="FetchPush-v4")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=5000)
    args = parser.parse_args()
    if not register_robotics_envs():
        raise SystemExit(f"her_failures: the Fetch envs need gymnasium-robotics: {INSTALL_LINE}")
    model = load_model(args.model)
    env = gym.make(args.env)
    kinds: dict[str, int] = dict.fromkeys(KINDS, 0)
    start_distance: dict[bool, list[float]] = {True: [], False: []}
    for i in range(args.episodes):
        obs, _ = env.reset(seed=args.seed + i)
        start, goal = obs["achieved_goal"].copy(), obs["desired_goal"].copy()
        done, info = False, {}
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        success = bool(info.get("is_success", 0.0))
        start_distance[success].append(float(np.linalg.norm(start - goal)))
        if not success:
            kinds[failure_kind(start, obs["achieved_goal"], goal)] += 1
    wins = len(start_distance[True])
    print(f"{args.model}: success rate {wins / args.episodes:.2f} over {args.episodes} episodes "
          f"(reset seeds {args.seed}-{args.seed + args.episodes - 1})")
    print("failures: " + ", ".join(f"{kind} {n}" for kind, n in kinds.items()))
    for success, label in ((True, "successes"), (False, "failures")):
        if start_distance[success]:
            print(f"mean start distance object-goal, {label}: {np.mean(start_distance[success]):.3f}")


if __name__ == "__main__":
    main()

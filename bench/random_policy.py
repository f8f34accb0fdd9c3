"""The return of a uniform random policy per env: the floor of the classic and box2d suites' "80% of the way from
random to rl-baselines3-zoo's tuned result".

    .venv/bin/python bench/random_policy.py [ENV ...] [--episodes 100]

Each episode is reset with its own seed (0, 1, ...), actions drawn from the action space seeded the same way;
prints the mean, standard deviation and episode count per env.
"""
from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

ENVS = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1",
        "LunarLander-v3", "LunarLanderContinuous-v3")


def random_returns(env_id: str, episodes: int) -> np.ndarray:
    """Undiscounted returns of ``episodes`` episodes of uniform random actions."""
    env = gym.make(env_id)
    returns = np.zeros(episodes)
    for episode in range(episodes):
        env.reset(seed=episode)
        env.action_space.seed(episode)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            returns[episode] += float(reward)
            done = terminated or truncated
    env.close()
    return returns


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("envs", nargs="*", default=list(ENVS))
    p.add_argument("--episodes", type=int, default=100)
    a = p.parse_args()
    for env_id in a.envs:
        r = random_returns(env_id, a.episodes)
        print(f"{env_id:28s} {r.mean():9.1f} +- {r.std():6.1f}  ({a.episodes} episodes)", flush=True)


if __name__ == "__main__":
    main()

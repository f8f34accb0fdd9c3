"""sb3-contrib's TRPO on Hopper-v5 with rl-baselines3-zoo's Hopper entry, for comparing learning (not speed).

    /work/peers-venv/bin/python bench/peer_trpo_hopper.py SEED    (a venv from bench/requirements-peers.txt)

The zoo's settings: VecNormalize, 2 envs x 1024 steps per update, critic minibatches of 128 for 20 epochs,
CG 25 steps, damping 0.1, lr 1e-3, gamma 0.99, GAE 0.95; 1M env steps. Prints a deterministic 5-episode
evaluation every 100k steps (VecNormalize's observation statistics copied and frozen) and a 10-episode one of
the final model: the same schedule as ours in bench/README.md ("a2c and trpo").
"""
from __future__ import annotations

import sys
import time

import torch
from sb3_contrib import TRPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecNormalize

STEPS, EVAL_EVERY = 1_000_000, 100_000


class EvaluateEvery(BaseCallback):
    """A deterministic evaluation every ``EVAL_EVERY`` env steps."""

    def __init__(self, evaluate) -> None:
        super().__init__()
        self.evaluate, self.next = evaluate, EVAL_EVERY

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next:
            mean, std = self.evaluate(self.model, 5)
            print(f"eval {self.num_timesteps} {mean:.1f} +- {std:.1f} ({time.strftime('%H:%M:%S')})", flush=True)
            self.next += EVAL_EVERY
        return True


def main() -> None:
    seed = int(sys.argv[1])
    torch.set_num_threads(1)
    env = VecNormalize(make_vec_env("Hopper-v5", n_envs=2, seed=seed), gamma=0.99)
    eval_env = VecNormalize(make_vec_env("Hopper-v5", n_envs=1, seed=seed + 1000), training=False,
                            norm_reward=False)

    def evaluate(model, episodes: int):
        eval_env.obs_rms = env.obs_rms.copy()
        return evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True)

    model = TRPO("MlpPolicy", env, n_steps=1024, batch_size=128, gamma=0.99, gae_lambda=0.95,
                 sub_sampling_factor=1, cg_max_steps=25, cg_damping=0.1, n_critic_updates=20, learning_rate=1e-3,
                 seed=seed, verbose=0)
    t0 = time.time()
    model.learn(STEPS, callback=EvaluateEvery(evaluate))
    mean, std = evaluate(model, 10)
    print(f"final {mean:.1f} +- {std:.1f} after {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()

"""stable-baselines3 / sb3-contrib with rl-baselines3-zoo's entries, for comparing learning (not speed).

    /work/peers-venv/bin/python bench/peer_zoo.py CASE SEED    (a venv from bench/requirements-peers.txt)

CASE is one of:

- ``trpo-hopper``: sb3-contrib's TRPO on Hopper-v5 with the zoo's Hopper entry: VecNormalize, 2 envs x 1024
  steps per update, critic minibatches of 128 for 20 epochs, CG 25 steps, damping 0.1, lr 1e-3, gamma 0.99,
  GAE 0.95.
- ``ppo-halfcheetah``: SB3's PPO on HalfCheetah-v5 with the zoo's HalfCheetah entry (the one behind its 1M
  figure of 5819 on HalfCheetah-v3): VecNormalize (its reward scaling with gamma 0.98, as the zoo passes the
  agent's gamma), 1 env x 512 steps, minibatches of 64 for 20 epochs, lr 2.0633e-5, gamma 0.98, GAE 0.92,
  clip 0.1, ent_coef 0.000401762, vf_coef 0.58096, max_grad_norm 0.8, 256x256 ReLU networks, log_std_init -2,
  no orthogonal init.
- ``a2c-lunarlander``: SB3's A2C on LunarLander-v3 with the zoo's LunarLander entry (behind its 0.2M figure of
  155.8 on LunarLander-v2): 8 envs x 5 steps, gamma 0.995, lr linear from 8.3e-4, ent_coef 1e-5, no
  VecNormalize; SB3's defaults besides (RMSprop alpha 0.99, eps 1e-5, separate 64x64 tanh networks).
- ``a2c-lunarlandercontinuous``: SB3's A2C on LunarLanderContinuous-v3 with the zoo's LunarLanderContinuous entry
  (behind its 5M figure of 84.2 on LunarLanderContinuous-v2) for the suite's 1M: VecNormalize, 4 envs x 8 steps,
  GAE 0.9, vf_coef 0.4, gamma 0.99, ent_coef 0, gSDE (log_std_init -2), no orthogonal init, the learning rate
  falling linearly from 7e-4 as over the zoo's 5M steps (to 5.6e-4 at 1M); SB3's defaults besides.
- ``sac-mountaincarcontinuous``: SB3's SAC on MountainCarContinuous-v0 with the zoo's entry (behind its 50k figure
  of 94.7 on MountainCarContinuous-v0): lr 3e-4, replay of 50k, batches of 512, ent_coef 0.1 fixed, 32 gradient
  steps every 32 env steps, gamma 0.9999, tau 0.01, no random start, gSDE (log_std_init -3.67), 64x64 networks.
- ``tqc-mountaincarcontinuous``: sb3-contrib's TQC on MountainCarContinuous-v0 with the zoo's entry (behind its 50k
  figure of 63.6): the values of the SAC case above, with TQC's 2 critics of 25 quantiles, the top 2 dropped.

Each case at its zoo budget capped at 1M, as bench/suite.py runs ours (1M env steps for the MuJoCo cases and
LunarLanderContinuous, 200k for LunarLander, 50k for MountainCar). Prints a deterministic
5-episode evaluation every tenth of the budget (VecNormalize's observation statistics copied and frozen) and a
10-episode one of the final model: the schedule of ours in bench/README.md.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm


def trpo_hopper(env: VecNormalize, seed: int) -> Any:
    from sb3_contrib import TRPO
    return TRPO("MlpPolicy", env, n_steps=1024, batch_size=128, gamma=0.99, gae_lambda=0.95,
                sub_sampling_factor=1, cg_max_steps=25, cg_damping=0.1, n_critic_updates=20, learning_rate=1e-3,
                seed=seed, verbose=0)


def ppo_halfcheetah(env: VecNormalize, seed: int) -> Any:
    from stable_baselines3 import PPO
    return PPO("MlpPolicy", env, n_steps=512, batch_size=64, n_epochs=20, learning_rate=2.0633e-05, gamma=0.98,
               gae_lambda=0.92, clip_range=0.1, ent_coef=0.000401762, vf_coef=0.58096, max_grad_norm=0.8,
               policy_kwargs={"log_std_init": -2, "ortho_init": False, "activation_fn": torch.nn.ReLU,
                              "net_arch": {"pi": [256, 256], "vf": [256, 256]}},
               seed=seed, verbose=0)


def a2c_lunarlander(env: VecEnv, seed: int) -> Any:
    from stable_baselines3 import A2C

    def linear(progress_remaining: float) -> float:
        return 8.3e-4 * progress_remaining

    return A2C("MlpPolicy", env, n_steps=5, gamma=0.995, learning_rate=linear, ent_coef=1e-5, seed=seed, verbose=0)


def a2c_lunarlandercontinuous(env: VecNormalize, seed: int) -> Any:
    from stable_baselines3 import A2C

    def linear_over_5m(progress_remaining: float) -> float:
        return 7e-4 * (0.8 + 0.2 * progress_remaining)  # 1M of the zoo's 5M: from 7e-4 down to 5.6e-4

    return A2C("MlpPolicy", env, n_steps=8, gae_lambda=0.9, vf_coef=0.4, gamma=0.99, ent_coef=0.0,
               learning_rate=linear_over_5m, use_sde=True,
               policy_kwargs={"log_std_init": -2, "ortho_init": False}, seed=seed, verbose=0)


# rl-zoo's MountainCarContinuous-v0 entry, the same for its SAC and its TQC
ZOO_MOUNTAINCARCONTINUOUS = {"learning_rate": 3e-4, "buffer_size": 50_000, "batch_size": 512, "ent_coef": 0.1,
                             "train_freq": 32, "gradient_steps": 32, "gamma": 0.9999, "tau": 0.01,
                             "learning_starts": 0, "use_sde": True,
                             "policy_kwargs": {"log_std_init": -3.67, "net_arch": [64, 64]}}


def sac_mountaincarcontinuous(env: VecEnv, seed: int) -> Any:
    from stable_baselines3 import SAC
    return SAC("MlpPolicy", env, **ZOO_MOUNTAINCARCONTINUOUS, seed=seed, verbose=0)


def tqc_mountaincarcontinuous(env: VecEnv, seed: int) -> Any:
    from sb3_contrib import TQC
    return TQC("MlpPolicy", env, **ZOO_MOUNTAINCARCONTINUOUS, seed=seed, verbose=0)


# case -> (env id, number of envs, VecNormalize's gamma (None: no VecNormalize), env steps, the model's constructor)
CASES: dict[str, tuple[str, int, float | None, int, Callable[[VecEnv, int], Any]]] = {
    "trpo-hopper": ("Hopper-v5", 2, 0.99, 1_000_000, trpo_hopper),
    "ppo-halfcheetah": ("HalfCheetah-v5", 1, 0.98, 1_000_000, ppo_halfcheetah),
    "a2c-lunarlander": ("LunarLander-v3", 8, None, 200_000, a2c_lunarlander),
    "a2c-lunarlandercontinuous": ("LunarLanderContinuous-v3", 4, 0.99, 1_000_000, a2c_lunarlandercontinuous),
    "sac-mountaincarcontinuous": ("MountainCarContinuous-v0", 1, None, 50_000, sac_mountaincarcontinuous),
    "tqc-mountaincarcontinuous": ("MountainCarContinuous-v0", 1, None, 50_000, tqc_mountaincarcontinuous),
}


class EvaluateEvery(BaseCallback):
    """A deterministic evaluation every ``every`` env steps."""

    def __init__(self, evaluate, every: int) -> None:
        super().__init__()
        self.evaluate, self.every, self.next = evaluate, every, every

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next:
            mean, std = self.evaluate(self.model, 5)
            print(f"eval {self.num_timesteps} {mean:.1f} +- {std:.1f} ({time.strftime('%H:%M:%S')})", flush=True)
            self.next += self.every
        return True


def main() -> None:
    case, seed = sys.argv[1], int(sys.argv[2])
    env_id, n_envs, norm_gamma, steps, make_model = CASES[case]
    torch.set_num_threads(1)
    env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    eval_env = make_vec_env(env_id, n_envs=1, seed=seed + 1000)
    if norm_gamma is not None:
        env = VecNormalize(env, gamma=norm_gamma)
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)

    def evaluate(model: BaseAlgorithm, episodes: int) -> tuple[float, float]:
        if norm_gamma is not None:
            eval_env.obs_rms = env.obs_rms.copy()
        return evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True)

    model = make_model(env, seed)
    t0 = time.time()
    model.learn(steps, callback=EvaluateEvery(evaluate, steps // 10))
    mean, std = evaluate(model, 10)
    print(f"final {mean:.1f} +- {std:.1f} after {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()

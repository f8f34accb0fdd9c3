"""HER figures: success rates on goal envs with and without hindsight relabelling, and the cost of relabelling.

    nice -n 10 .venv/bin/python bench/her.py bits [--seeds 0 1 2] [--steps 50000] [--n_bits 15]
    nice -n 10 .venv/bin/python bench/her.py fetch [--seeds 0 1 2] [--steps 20000]
    nice -n 10 .venv/bin/python bench/her.py sampling [--steps 50000] [--n_bits 15] [--repeats 20]

``bits``: per seed, her (base sac) and plain sac (the same settings, Dict observations flattened, no
relabelling) on BitFlipping-v0 (continuous actions); ``fetch``: her+sac on FetchReach-v4 with the shipped
entry. Each row is a DETERMINISTIC evaluation of the final model (100 episodes in a separate env seeded
after training's; success = ``info["is_success"]`` at the episode's last step) and the mean return of the
last 100 training episodes, and the time per gradient step (replay sampling, with relabelling for her, plus
the fused update) with the sampling part of it: her and plain sac rows of ``bits`` run the same settings,
so their ratio is what relabelling adds. ``sampling``: the same comparison without the noise of two runs
at different times: one process fills a HER buffer and a plain replay with the same ``--steps`` random
bit-flipping transitions, then alternates, ``--repeats`` times, one training block of the bits settings
(25 gradient steps of batch 256, her's sac model) sampled from each; medians of ms per gradient step.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING, Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

if TYPE_CHECKING:
    from algos.offpolicy.actor_critic import ActorCriticModel
    from algos.offpolicy.loop import EncodedReplay
    from common.buffers.her import HerReplayBuffer

EVAL_EPISODES = 100
# Bit flipping: the her defaults (hyperparams/her.toml) in smaller blocks, one gradient step per 2 env steps.
BITS_SETTINGS = {"train_freq": 50, "gradient_steps": 25, "learning_starts": 1000, "log_interval": 10**6}
SAC_KEYS = ("lr", "gamma", "tau", "batch_size", "buffer_size", "learning_starts", "train_freq", "gradient_steps",
            "normalize_observations", "log_interval")


class SampleTimer:
    """Wraps a buffer class's ``sample`` to add up the seconds it takes."""

    def __init__(self, cls: type) -> None:
        self.cls, self.seconds, self.original = cls, 0.0, cls.sample

        def timed(buffer: HerReplayBuffer | EncodedReplay, *args: Any, **kwargs: Any) -> dict[str, Any]:
            t = time.perf_counter()
            try:
                return self.original(buffer, *args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t

        cls.sample = timed

    def restore(self) -> None:
        self.cls.sample = self.original


def train(alg: str, env_id: str, steps: int, seed: int, env_kwargs: dict,
          settings: dict) -> tuple[ActorCriticModel, float, float, float]:
    """(model, seconds, last-100 training return mean, sampling seconds) of one run; her keeps Dicts."""
    import envs  # noqa: F401 - registers BitFlipping-v0
    from algos.offpolicy.loop import EncodedReplay
    from common.buffers.her import HerReplayBuffer
    from run_util import get_env_type
    from runner.env_factory import make_vec_env

    learn = __import__(f"algos.{alg}.{alg}", fromlist=["learn"]).learn
    env = make_vec_env(env_id, get_env_type(env_id)[0], 1, seed, env_kwargs=env_kwargs,
                       flatten_dict_observations=(alg != "her"))
    timer = SampleTimer(HerReplayBuffer if alg == "her" else EncodedReplay)
    t = time.perf_counter()
    try:
        model = learn(env=env, total_timesteps=steps, seed=seed, **settings)
    finally:
        timer.restore()
    seconds = time.perf_counter() - t
    returns = env.env_method("get_episode_rewards")[0][-100:]
    env.close()
    return model, seconds, float(np.mean(returns)) if returns else float("nan"), timer.seconds


def evaluate(model: ActorCriticModel, env_id: str, seed: int, env_kwargs: dict,
             flatten: bool) -> tuple[float | None, float]:
    """Deterministic evaluation of ``model`` over ``EVAL_EPISODES`` episodes: (success rate, return mean)."""
    from run_util import get_env_type
    from runner.env_factory import make_vec_env
    from runner.evaluation import evaluate as run_evaluation

    env = make_vec_env(env_id, get_env_type(env_id)[0], 1, seed + 12345, env_kwargs=env_kwargs,
                       flatten_dict_observations=flatten)
    result = run_evaluation(model, env, EVAL_EPISODES, deterministic=True)
    env.close()
    return result.success_rate, result.mean


def row(label: str, seed: int, steps: int, model: ActorCriticModel, seconds: float, train_return: float,
        sampling: float, env_id: str, env_kwargs: dict, flatten: bool) -> None:
    """One table row; the last two columns: ms per gradient step (replay sampling + fused update) and the
    sampling part of it."""
    success, ret = evaluate(model, env_id, seed, env_kwargs, flatten)
    n = max(1, model.train_steps)
    print(f"| {label} | {seed} | {steps} | {success:.2f} | {ret:.2f} | {train_return:.2f} | {seconds:.0f} | "
          f"{(sampling + model.train_time) / n * 1e3:.2f} | {sampling / n * 1e3:.3f} |", flush=True)


HEADER = ("| run | seed | env steps | final success rate (deterministic, 100 ep.) | final return (same) | "
          "training return (last 100 ep.) | seconds | ms per gradient step | of which sampling |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")


def bits(args: argparse.Namespace) -> None:
    kwargs = {"n_bits": args.n_bits}
    her_settings = {**BITS_SETTINGS, "her_algorithm": "sac"}
    from algos.hyperparameters import table

    her_defaults = table("her").defaults
    sac_settings = {k: her_settings.get(k, her_defaults[k]) for k in SAC_KEYS}
    print(f"BitFlipping-v0 n_bits={args.n_bits}, {args.steps} steps, 1 env; settings: her {her_settings}, "
          f"sac {sac_settings}")
    print(HEADER)
    for alg, settings in (("her", her_settings), ("sac", sac_settings)):  # all her rows first
        for seed in args.seeds:
            model, seconds, train_return, sampling = train(alg, "BitFlipping-v0", args.steps, seed, kwargs, settings)
            row(f"{alg}{'+sac' if alg == 'her' else ' (no HER)'}", seed, args.steps, model, seconds, train_return,
                sampling, "BitFlipping-v0", kwargs, alg != "her")


def fetch(args: argparse.Namespace) -> None:
    from run_util import get_env_type

    get_env_type("FetchReach-v4")  # registers gymnasium-robotics, or one line saying how to install it
    print(f"FetchReach-v4, {args.steps} steps, 1 env, her+sac with hyperparams/her.toml's entry")
    print(HEADER)
    for seed in args.seeds:
        from algos.hyperparameters import table

        entry = table("her").by_env_id.get("FetchReach-v4", {})
        model, seconds, train_return, sampling = train("her", "FetchReach-v4", args.steps, seed, {}, dict(entry))
        row("her+sac", seed, args.steps, model, seconds, train_return, sampling, "FetchReach-v4", {}, False)


def sampling(args: argparse.Namespace) -> None:
    import envs  # noqa: F401 - registers BitFlipping-v0
    from algos.her.model import HerSACModel
    from algos.hyperparameters import table
    from algos.offpolicy.loop import EncodedReplay
    from common.buffers.her import HerReplayBuffer, vec_env_reward
    from runner.env_factory import make_vec_env

    hp = table("her").defaults
    env = make_vec_env("BitFlipping-v0", "envs", 1, 0, env_kwargs={"n_bits": args.n_bits},
                       flatten_dict_observations=False)
    model = HerSACModel(env.observation_space, env.action_space, seed=0, gamma=hp["gamma"], lr=hp["lr"],
                        normalize_observations=True)
    her = HerReplayBuffer(hp["buffer_size"], env.observation_space, model.act_dim, 1, vec_env_reward(env),
                          encode=model.encoder)
    plain = EncodedReplay(hp["buffer_size"], model)
    rng = np.random.default_rng(0)
    obs = env.reset()
    for _ in range(args.steps):
        unit = rng.uniform(-1, 1, (1, model.act_dim)).astype(np.float32)
        new_obs, rewards, dones, infos = env.step(model.scale_actions(unit))
        x, next_x = model.encoder(obs), model.encoder(new_obs)
        for buffer in (her, plain):
            buffer.store(obs, x, unit, rewards, new_obs, next_x, dones, infos)
        obs = new_obs
    shape = (BITS_SETTINGS["gradient_steps"], 256)
    model.train(plain.sample(shape, rng))  # trace once
    times: dict[str, list[tuple[float, float]]] = {"plain": [], "her": []}
    for _ in range(args.repeats):
        for name, buffer in (("plain", plain), ("her", her)):
            t0 = time.perf_counter()
            batch = buffer.sample(shape, rng)
            t1 = time.perf_counter()
            model.train(batch)
            times[name].append((t1 - t0, time.perf_counter() - t1))
    env.close()
    print(f"BitFlipping-v0 n_bits={args.n_bits}: {args.steps} random transitions in each buffer; blocks of "
          f"{shape[0]} gradient steps, batch {shape[1]}, her's sac model (256x256); medians of {args.repeats}")
    print("| replay | ms per gradient step (sampling + update) | of which sampling |\n| --- | ---: | ---: |")
    med = {}
    for name, pairs in times.items():
        sample_s, train_s = np.median([p[0] for p in pairs]), np.median([p[1] for p in pairs])
        med[name] = (sample_s + train_s) / shape[0] * 1e3
        print(f"| {name} | {med[name]:.2f} | {sample_s / shape[0] * 1e3:.3f} |")
    print(f"relabelling adds {100 * (med['her'] / med['plain'] - 1):+.1f}% per gradient step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("bits", "fetch", "sampling"))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--n_bits", type=int, default=15)
    args = parser.parse_args()
    args.steps = args.steps or {"bits": 50_000, "fetch": 20_000, "sampling": 50_000}[args.what]
    {"bits": bits, "fetch": fetch, "sampling": sampling}[args.what](args)


if __name__ == "__main__":
    main()

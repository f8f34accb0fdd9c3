"""Evaluation during training (--eval_freq) and of a model file (--eval_episodes with --num_timesteps=0)."""
import csv
import json
import os

import numpy as np
import pytest

import envs  # noqa: F401  (registers the test envs)
import run
from common.errors import UserError
from common.vec_env import VecNormalize
from runner import evaluation
from runner.env_factory import make_vec_env


def _rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class _Stub:
    """A model with a fixed action and a live VecNormalize, saving what it is asked to."""

    def __init__(self, vec_normalize=None):
        self.vec_normalize, self.saved = vec_normalize, []

    def initial_state(self, n):
        return None

    def predict(self, obs, state=None, episode_start=None, deterministic=True):
        return np.zeros((len(obs), 1), np.float32), None

    def save(self, path):
        self.saved.append(path)


def test_eval_env_gets_the_training_statistics_frozen() -> None:
    train = VecNormalize(make_vec_env("IdentityBox-v0", "envs", 2, seed=0, vec_env_kind="dummy"))
    train.reset()
    for _ in range(50):
        train.step(np.random.default_rng(0).uniform(-1, 1, (2, 1)).astype(np.float32))
    eval_env = VecNormalize(make_vec_env("IdentityBox-v0", "envs", 2, seed=1, vec_env_kind="dummy"))
    result = evaluation.evaluate(_Stub(train), eval_env, episodes=4)
    assert len(result.returns) == 4
    vn = evaluation.unwrap_vec_normalize(eval_env)
    assert not vn.training and not vn.norm_reward
    for key, value in train.get_state().items():  # statistics equal training's and unchanged by 4 episodes
        np.testing.assert_array_equal(vn.get_state()[key], value)
    train.close()
    eval_env.close()


def test_best_zip_follows_the_highest_mean(tmp_path, monkeypatch) -> None:
    means = iter([1.0, 3.0, 2.0])
    monkeypatch.setattr(evaluation, "evaluate",
                        lambda *a, **k: evaluation.EvalResult([next(means)], [5], 0.01))
    model = _Stub()
    ev = evaluation.Evaluator(env=None, every=10, episodes=1, log_dir=str(tmp_path))
    for t in (10, 20, 30):
        ev.run(model, t)
    assert model.saved == [str(tmp_path / "best.zip")] * 2  # at the 1.0 and at the 3.0, not at the 2.0
    assert ev.best_mean == 3.0
    rows = _rows(tmp_path / "evaluations.csv")
    assert [int(r["timesteps"]) for r in rows] == [10, 20, 30] and float(rows[1]["return_mean"]) == 3.0


def test_training_with_eval_logs_eval_keys_and_keeps_best_and_final(tmp_path) -> None:
    log = tmp_path / "log"
    run.main(["--alg=ppo2", "--env=CartPole-v1", "--num_env=2", "--num_timesteps=1024", "--nsteps=64",
              "--eval_freq=256", "--eval_episodes=3", "--eval_envs=2", f"--log_path={log}", "--log_format=csv",
              "--no_progress", "--seed=0"])
    rows = _rows(log / "evaluations.csv")
    assert [int(r["timesteps"]) for r in rows] == [256, 512, 768, 1024]
    assert all(int(r["episodes"]) == 3 for r in rows)
    progress = _rows(log / "progress.csv")
    assert {"eval/return_mean", "eval/return_std", "eval/length_mean", "eval/time"} <= set(progress[0])
    assert max(int(r["time/total_timesteps"]) for r in progress) == 1024  # eval steps are not counted
    monitors = sorted(f for f in os.listdir(log) if f.endswith("monitor.csv"))
    assert monitors == ["0.0.monitor.csv", "0.1.monitor.csv"]  # the eval envs write none
    assert (log / "best.zip").exists() and (log / "final.zip").exists()
    meta = json.loads(__import__("zipfile").ZipFile(log / "final.zip").read("metadata.json"))
    assert meta["env"] == {"env": "CartPole-v1", "env_kwargs": {}, "wrappers": []}


def test_model_file_evaluation_needs_only_the_file(tmp_path, capsys) -> None:
    model_path = tmp_path / "m.zip"
    run.main(["--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=256", "--nsteps=64", f"--save_path={model_path}",
              f"--log_path={tmp_path / 'a'}", "--log_format=csv", "--no_progress"])
    capsys.readouterr()
    run.main([f"--load_path={model_path}", "--num_timesteps=0", "--eval_episodes=4", f"--log_path={tmp_path / 'b'}",
              "--log_format=csv"])
    out = capsys.readouterr().out
    assert "evaluation over 4 episodes: return " in out and "(min " in out and "length mean" in out


@pytest.mark.parametrize("flag", ["--eval_freq=-1", "--eval_episodes=0", "--eval_envs=0", "--eval_freq=x"])
def test_bad_eval_flags_are_one_line(flag: str) -> None:
    with pytest.raises((UserError, SystemExit)) as e:
        run.main(["--env=CartPole-v1", flag])
    assert "\n" not in str(e.value)

"""python -m tune: a study of two tiny trials, its outputs, and its one-line errors."""
import sys

import pytest

import run
import tune
from run_config import resolve

pytest.importorskip("optuna")


def test_two_tiny_trials_write_an_entry_the_runner_accepts(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    status = tune.main(["--alg=ppo2", "--env=CartPole-v1", "--trials=2", "--seeds=1", "--budget=4096", "--num_env=2",
                        f"--out={out}", f"--storage={tmp_path / 'journal.log'}", "--sampler_seed=0"])
    assert status == 0
    assert {"best.toml", "trials.md", "history.png"} <= {p.name for p in out.iterdir()}
    assert "2 complete of 2 trials" in (out / "trials.md").read_text()
    args, extra = run.parse_args(["--alg=ppo2", "--env=CartPole-v1", f"--hyperparams={out / 'best.toml'}"])
    config = resolve(args, extra)
    best = (out / "best.toml").read_text()
    assert f"nsteps = {config.hyperparameters['nsteps']}\n" in best
    assert config.sources["nsteps"] == f'{out / "best.toml"} [env."CartPole-v1"]'
    # a second worker on the same journal continues the same study
    assert tune.main(["--alg=ppo2", "--env=CartPole-v1", "--trials=1", "--seeds=1", "--budget=4096", "--num_env=2",
                      f"--out={out}", f"--storage={tmp_path / 'journal.log'}"]) == 0
    assert "3 complete of 3 trials" in (out / "trials.md").read_text()


def test_errors_are_one_line(monkeypatch, capsys) -> None:
    assert tune.main(["--alg=nope", "--env=CartPole-v1"]) == 2
    assert capsys.readouterr().err.strip().startswith("tune: error: no search space for 'nope'")
    monkeypatch.setitem(sys.modules, "optuna", None)  # as if Optuna were not installed
    assert tune.main(["--env=CartPole-v1"]) == 2
    assert capsys.readouterr().err.strip() == "tune: error: tuning needs Optuna: pip install -r requirements-tune.txt"


def test_equal_final_scores_are_ranked_by_the_mean_of_all_evaluations(tmp_path) -> None:
    import optuna

    study = optuna.create_study(direction="maximize")
    dist = {"nsteps": optuna.distributions.CategoricalDistribution([16, 32, 64])}
    for nsteps, value, curve in ((16, 500.0, 300.0), (32, 500.0, 450.0), (64, 480.0, 470.0)):
        study.add_trial(optuna.trial.create_trial(params={"nsteps": nsteps}, distributions=dist, value=value,
                                                  user_attrs={tune.CURVE_MEAN: curve}))
    args = tune.parse_args(["--env=CartPole-v1", f"--out={tmp_path}"])
    best = tune.write_results(args, study)
    with open(best) as f:
        assert "nsteps = 32\n" in f.read()  # optuna's own best_trial is the first of the tied ones
    rows = [line.split("|")[1].strip() for line in (tmp_path / "trials.md").read_text().splitlines()[4:]]
    assert rows == ["1", "0", "2"]

"""python -m tune: a study of two tiny trials, its outputs, and its one-line errors."""
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import run
import tune
from runner.config import resolve

optuna = pytest.importorskip("optuna")
Choices, Ints, Floats = (optuna.distributions.CategoricalDistribution, optuna.distributions.IntDistribution,
                         optuna.distributions.FloatDistribution)


def test_two_tiny_trials_write_an_entry_the_runner_accepts(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    status = tune.main(["--alg=ppo2", "--env=CartPole-v1", "--trials=2", "--seeds=1", "--budget=4096", "--num_env=2",
                        f"--out={out}", f"--storage={tmp_path / 'journal.log'}", "--sampler_seed=0"])
    assert status == 0
    assert {"best.toml", "trials.md", "history.png"} <= {p.name for p in out.iterdir()}
    assert "2 complete of 2 trials" in (out / "trials.md").read_text()
    assert sorted(p.name for p in (out / "trial0").iterdir()) == ["seed100"]  # not a seed results are reported on
    assert "mean of seeds 100-100 at 4096 steps" in (out / "best.toml").read_text()
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
    dist = {"nsteps": NSTEPS}
    for nsteps, value, curve in ((16, 500.0, 300.0), (32, 500.0, 450.0), (64, 480.0, 470.0)):
        study.add_trial(optuna.trial.create_trial(params={"nsteps": nsteps}, distributions=dist, value=value,
                                                  user_attrs={tune.CURVE_MEAN: curve}))
    args = tune.parse_args(["--env=CartPole-v1", f"--out={tmp_path}"])
    best = tune.write_results(args, study, tune.search_space("ppo2"))
    with open(best) as f:
        assert "nsteps = 32\n" in f.read()  # optuna's own best_trial is the first of the tied ones
    rows = [line.split("|")[1].strip() for line in (tmp_path / "trials.md").read_text().splitlines()[4:]]
    assert rows == ["1", "0", "2"]


def _trial(number: int, params: dict, distributions: dict, value: float):
    """A finished trial; its parameters set after Optuna's checks (a journal line can hold anything)."""
    trial = optuna.trial.create_trial(value=value)
    trial.number, trial.params, trial.distributions = number, params, distributions
    return trial


NSTEPS = Choices([16, 32, 64, 128, 256, 512, 1024, 2048])  # as in hyperparams/search/ppo2.toml
LEGIT = _trial(0, {"nsteps": 32, "noptepochs": 4}, {"nsteps": NSTEPS, "noptepochs": Ints(1, 20)}, 10.0)


@pytest.mark.parametrize(("params", "distributions", "reason"), [
    ({"network": "os:system"}, {"network": Choices(["os:system"])}, "'network' is not in the search space"),
    ({"command": "touch /tmp/x"}, {"command": Choices(["touch /tmp/x"])}, "'command' is not in the search space"),
    ({"nsteps": 32}, {"nsteps": Choices([32, 33])}, "nsteps was drawn from another distribution"),  # fails TPE
    ({"noptepochs": 4}, {"noptepochs": Choices([4])}, "noptepochs was drawn from another distribution"),
    ({"nsteps": 33}, {"nsteps": NSTEPS}, "nsteps = 33 is outside"),
    ({"nsteps": "32"}, {"nsteps": NSTEPS}, "nsteps = '32' is outside"),
    ({"lam": 1}, {"lam": Choices([0.8, 0.9, 0.92, 0.95, 0.98, 1.0])}, "lam = 1 is outside"),  # 1.0 is the choice
    ({"noptepochs": 21}, {"noptepochs": Ints(1, 20)}, "noptepochs = 21 is outside"),
    ({"noptepochs": 4.0}, {"noptepochs": Ints(1, 20)}, "noptepochs = 4.0 is outside"),
    ({"noptepochs": True}, {"noptepochs": Ints(1, 20)}, "noptepochs = True is outside"),
    ({"lr": 0.5}, {"lr": Floats(1e-5, 3e-3, log=True)}, "lr = 0.5 is outside"),
    ({"lr": "0.001"}, {"lr": Floats(1e-5, 3e-3, log=True)}, "lr = '0.001' is outside"),
])
def test_trials_outside_the_search_space_never_reach_best_toml(params, distributions, reason, tmp_path,
                                                                capsys) -> None:
    study = SimpleNamespace(trials=[LEGIT, _trial(1, params, distributions, 1e9)], study_name="ppo2-CartPole-v1")
    args = tune.parse_args(["--env=CartPole-v1", f"--out={tmp_path}"])
    best = tune.write_results(args, study, tune.search_space("ppo2"))
    text = (tmp_path / "best.toml").read_text()
    assert str(best) == str(tmp_path / "best.toml") and "trial 0 " in text
    assert text.splitlines()[1:] == ['[env."CartPole-v1"]', "nsteps = 32", "noptepochs = 4"]
    err = capsys.readouterr().err.strip()
    assert err.startswith("tune: warning: skipped 1 trial(s) with parameters outside hyperparams/search/ppo2.toml "
                          f"(trial 1: {reason}") and err.endswith(")") and "\n" not in err
    assert [row.split("|")[1].strip() for row in (tmp_path / "trials.md").read_text().splitlines()[4:]] == ["0"]


def test_a_shared_study_holding_foreign_trials_is_refused_before_any_training(tmp_path, capsys) -> None:
    journal = tmp_path / "journal.log"
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    study = optuna.create_study(study_name="ppo2-CartPole-v1", storage=JournalStorage(JournalFileBackend(str(journal))))
    study.add_trial(LEGIT)
    study.add_trial(_trial(1, {"network": "os:system"}, {"network": Choices(["os:system"])}, 1e9))
    out = tmp_path / "out"
    assert tune.main(["--env=CartPole-v1", "--trials=1", "--seeds=1", "--budget=64", f"--out={out}",
                      f"--storage={journal}"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"tune: error: study ppo2-CartPole-v1 in {journal} holds 1 trial(s) with parameters outside "
        "hyperparams/search/ppo2.toml (trial 1: 'network' is not in the search space): written by something "
        "else than this search; use a new --study or --storage")
    assert not (out / "best.toml").exists() and not list(out.glob("trial*"))


def _bad_storage(kind: str, tmp_path) -> str:
    """A --storage that cannot be used, written as a user could give it."""
    if kind in ("missing folder", "fifo"):
        path = tmp_path / ("missing" if kind == "missing folder" else "") / "journal.log"
        if kind == "fifo":
            os.mkfifo(path)
        return str(path)
    files = {"corrupt journal": ("j.log", b'{"op_code":0,"worker_id":"x"\n{"op_code": oops\n'),
             "zip": ("study.zip", b"PK\x03\x04\x14\x00\x00\x00"),
             "not a database": ("tune.db", b"not a database\n")}
    if kind in files:
        name, data = files[kind]
        (tmp_path / name).write_bytes(data)
        return f"sqlite:///{tmp_path / name}" if name.endswith(".db") else str(tmp_path / name)
    return {"bogus url": "bogus://", "device": "/dev/zero", "no server": "mysql://bob:secret@127.0.0.1:1/db"}[kind]


@pytest.mark.timeout(60)  # a FIFO was waited on, /dev/zero read to the end of memory
@pytest.mark.parametrize(("kind", "words"), [
    ("missing folder", "missing/journal.log: no folder"),
    ("corrupt journal", "j.log: not a readable Optuna journal (JSONDecodeError: "),
    ("zip", "study.zip is not an Optuna journal file (it starts with b'PK"),
    ("not a database", "tune.db: cannot open it as an Optuna database ((sqlite3.DatabaseError) file is not a database)"),
    ("bogus url", "bogus://: cannot open it as an Optuna database (Can't load plugin: sqlalchemy.dialects:bogus)"),
    ("fifo", "journal.log is a FIFO (named pipe), not a regular file"),
    ("device", "/dev/zero is a character device, not a regular file"),
    ("no server", "mysql://bob:***@127.0.0.1:1/db: cannot open it as an Optuna database ("),  # no driver, no server
])
def test_a_storage_that_cannot_be_used_is_one_line(kind, words, tmp_path, capsys) -> None:
    storage = _bad_storage(kind, tmp_path)
    before = Path(storage).read_bytes() if kind in ("zip", "corrupt journal") else None
    assert tune.main(["--env=CartPole-v1", "--trials=1", "--seeds=1", "--budget=64", f"--out={tmp_path / 'out'}",
                      f"--storage={storage}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tune: error: --storage ") and words in err and "\n" not in err and "secret" not in err
    if before is not None:
        assert Path(storage).read_bytes() == before  # nothing appended to the user's file


@pytest.mark.timeout(60)  # writing trials.md into a FIFO waited for a reader
def test_an_output_that_is_not_a_regular_file_is_refused_before_any_trial(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "trials.md")
    assert tune.main(["--env=CartPole-v1", "--trials=1", "--seeds=1", "--budget=64", f"--out={out}"]) == 2
    assert capsys.readouterr().err.strip() == (f"tune: error: --out {out / 'trials.md'} is a FIFO (named pipe), "
                                               "not a regular file; give another name")


@pytest.mark.parametrize("alg", tune.algorithms_with_search_spaces())
def test_every_search_space_value_is_one_its_algorithm_accepts(alg) -> None:
    from algos.hyperparameters import table
    tab = table(alg)
    for name, spec in tune.search_space(alg).items():
        assert name in tab.kinds, f"hyperparams/search/{alg}.toml [{name}] is not a hyperparameter of {alg}"
        values = spec["choices"] if "choices" in spec else [spec["low"], spec["high"]]
        for value in values:
            tab.check(name, value)  # raises ConfigError for a wrong type or a value outside the range

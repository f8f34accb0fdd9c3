"""Code is chosen by the command line (or a Python caller), never by a file: a model file's env record, a
``--hyperparams`` file's network and a log folder's config.json import nothing and write nowhere they name
unless the command line names the same; the command line's own choices keep working."""
from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from common.trust import TrustError
from runner import app as run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = ["--num_hidden=8", "--log_format=csv", "--no_progress"]
_names = itertools.count()

MODULE = '''
import pathlib

import gymnasium as gym

from common.nn.networks import mlp

pathlib.Path({marker!r}).write_text("imported")
gym.register("{env}", entry_point="envs.identity:IdentityDiscreteEnv", max_episode_steps=100)


class Wrapper(gym.Wrapper):
    pass


def builder(num_hidden=8):
    return mlp(num_hidden=num_hidden)
'''


class Marked:
    """A module in a folder on sys.path that writes ``marker`` when imported and registers ``env``."""

    def __init__(self, folder: Path) -> None:
        self.name = f"trust_marker_{os.getpid()}_{next(_names)}"
        self.marker = folder / f"{self.name}.imported"
        self.env = f"{self.name.title()}-v0"
        (folder / f"{self.name}.py").write_text(MODULE.format(marker=str(self.marker), env=self.env))

    def imported(self) -> bool:
        return self.marker.exists()


@pytest.fixture
def marked(tmp_path, monkeypatch):
    """A factory of fresh marker modules importable from this process."""
    folder = tmp_path / "modules"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return lambda: Marked(folder)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> str:
    """A tiny ppo2 model of IdentityDiscrete-v0."""
    folder = tmp_path_factory.mktemp("model")
    run.main(["--alg=ppo2", "--env=IdentityDiscrete-v0", "--num_timesteps=64", "--nsteps=32", *FAST,
              f"--log_path={folder / 'log'}", f"--save_path={folder / 'model.zip'}"])
    return str(folder / "model.zip")


def _with_env_record(path: str, out: Path, **record) -> str:
    """A copy of model file ``path`` whose env record has ``record``'s fields."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    meta = json.loads(members["metadata.json"])
    meta["env"] = {**meta["env"], **record}
    members["metadata.json"] = json.dumps(meta).encode()
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return str(out)


def _evaluate(path: str, tmp_path: Path, *flags: str) -> None:
    run.main([f"--load_path={path}", "--num_timesteps=0", "--eval_episodes=1", "--log_format=csv",
              f"--log_path={tmp_path / f'eval{next(_names)}'}", *flags])


def test_model_files_env_module_is_imported_only_when_named_on_the_command_line(model_file, marked, tmp_path):
    mod = marked()
    path = _with_env_record(model_file, tmp_path / "m.zip", env=f"{mod.name}:{mod.env}")
    with pytest.raises(TrustError, match=rf"was trained with --env={mod.name}:{mod.env}; pass "
                                         rf"--env={mod.name}:{mod.env} to import {mod.name} \(a file"):
        _evaluate(path, tmp_path)
    options = _with_env_record(path, tmp_path / "o.zip", env_kwargs={"n": 4}, wrappers=["envs.wrappers:RewardOffset"])
    with pytest.raises(TrustError, match=rf"""pass --env={mod.name}:{mod.env} "--env_kwargs={{'n': 4}}" """
                                         rf"--wrapper=envs.wrappers:RewardOffset to import {mod.name} \(a file"):
        _evaluate(options, tmp_path)  # with the env options that go with the env
    assert not mod.imported()
    _evaluate(path, tmp_path, f"--env={mod.name}:{mod.env}")  # the user's choice: imported, and the model plays
    assert mod.imported()


def test_model_files_wrappers_are_built_only_when_named_on_the_command_line(model_file, marked, tmp_path):
    mod = marked()
    wrapper = f"{mod.name}:Wrapper"
    path = _with_env_record(model_file, tmp_path / "m.zip", wrappers=[wrapper])
    with pytest.raises(TrustError, match=rf"was trained with --wrapper={wrapper}; pass --wrapper={wrapper} to build"):
        _evaluate(path, tmp_path)
    with pytest.raises(TrustError, match=r"--wrapper=envs.wrappers:RewardOffset disagrees"):
        _evaluate(path, tmp_path, "--wrapper=envs.wrappers:RewardOffset")
    assert not mod.imported()
    _evaluate(path, tmp_path, f"--wrapper={wrapper}")
    assert mod.imported()


def test_model_file_naming_a_module_env_is_one_line_on_the_command_line(model_file, tmp_path):
    """``module:EnvId`` in a file: a registered id (``this:CartPole-v1``, the Zen of Python) plays with no import;
    an id only the module would register is exit 2, one line; the module never runs."""
    (tmp_path / "evilmod.py").write_text(f"open({str(tmp_path / 'pwned')!r}, 'w').close()\n")
    for env in ("evilmod:IdentityDiscrete-v0", "this:CartPole-v1", "evilmod:Unregistered-v0"):
        path = _with_env_record(model_file, tmp_path / "evil.zip", env=env)
        proc = subprocess.run([sys.executable, "-m", "run", "--num_timesteps=0", f"--load_path={path}", "--play",
                               "--play_episodes=1", "--no_render", f"--log_path={tmp_path / 'log'}"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, "PYTHONPATH": ROOT})
        assert "Zen of Python" not in proc.stdout
        if env.endswith("Unregistered-v0"):
            assert proc.returncode == 2, proc.stderr
            line = (f"run: error: {path} was trained with --env={env}; pass --env={env} to import "
                    f"{env.split(':')[0]} (a file does not choose code or output paths: docs/trust.md)")
            assert proc.stderr.splitlines() == [line]
        elif "CartPole" not in env:  # the file's model fits IdentityDiscrete, not CartPole
            assert proc.returncode == 0, proc.stderr
            assert "played 1 episode:" in proc.stdout
    assert not (tmp_path / "pwned").exists()


def _config(tmp_path: Path, *argv: str, hyperparams: str):
    (tmp_path / "hp.toml").write_text(hyperparams)
    args, extra = run.parse_args([*argv, f"--hyperparams={tmp_path / 'hp.toml'}"])
    return run.resolve(run.complete_args(args), extra)


def test_hyperparams_files_network_must_be_registered(marked, tmp_path):
    mod = marked()
    with pytest.raises(TrustError, match=rf"hp.toml sets --network={mod.name}:builder; pass "
                                         rf"--network={mod.name}:builder to import {mod.name}"):
        _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", hyperparams=f'network = "{mod.name}:builder"\n')
    assert not mod.imported()
    with pytest.raises(TrustError, match=r'hp.toml \[env."CartPole-v1"\] sets --network=os:system'):
        _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1",
                hyperparams='[env."CartPole-v1"]\nnetwork = "os:system"\ncommand = "echo"\n')
    with pytest.raises(run.UsageError, match=r"hp.toml: network expects a registered name such as mlp, got 3"):
        _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", hyperparams="network = 3\n")
    config = _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", hyperparams='network = "lstm"\nnlstm = 8\n')
    assert config.network == "lstm" and config.learn_kwargs["nlstm"] == 8  # values, and registered names
    config = _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", f"--network={mod.name}:builder",
                     hyperparams='network = "os:system"\n')  # the command line's network wins
    assert config.network == f"{mod.name}:builder"


def test_hyperparams_file_cannot_run_a_shell_command(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "hp.toml").write_text(f'network = "os:system"\ncommand = "touch {marker}"\n')
    with pytest.raises(TrustError, match="pass --network=os:system to import os"):
        run.main(["--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=64", "--nsteps=32", f"--log_path={tmp_path / 'l'}",
                  "--log_format=csv", "--no_progress", f"--hyperparams={tmp_path / 'hp.toml'}"])
    assert not marker.exists()


def test_users_network_from_the_command_line_trains(marked, tmp_path):
    mod = marked()
    model = run.main(["--alg=ppo2", "--env=IdentityDiscrete-v0", "--num_timesteps=64", "--nsteps=32",
                      f"--network={mod.name}:builder", *FAST, f"--log_path={tmp_path / 'log'}"])
    assert mod.imported() and model.num_timesteps == 64


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> tuple[str, str]:
    """(log folder, model file) of a short ppo2 run with a final checkpoint."""
    folder = tmp_path_factory.mktemp("resumable")
    log, save = str(folder / "log"), str(folder / "model.zip")
    run.main(["--alg=ppo2", "--env=IdentityDiscrete-v0", "--nsteps=32", "--num_timesteps=64", "--checkpoint_freq=64",
              "--seed=1", *FAST, f"--log_path={log}", f"--save_path={save}"])
    return log, save


def _with_argv(log: str, out: Path, edit) -> str:
    """A copy of the log folder ``log`` whose config.json holds the command line ``edit(argv)``."""
    shutil.copytree(log, out)
    os.unlink(out / ".runner.lock")
    config = json.loads((out / "config.json").read_text())
    config["argv"] = edit(config["argv"])
    (out / "config.json").write_text(json.dumps(config))
    return str(out)


def _replaced(argv: list[str], flag: str, value: str) -> list[str]:
    return [a for a in argv if not a.startswith(f"--{flag}=")] + [f"--{flag}={value}"]


def test_resume_takes_no_code_from_config_json(finished_run, marked, tmp_path):
    log, save = finished_run
    mod = marked()
    attacks = {"env": f"{mod.name}:{mod.env}", "network": f"{mod.name}:builder", "wrapper": f"{mod.name}:Wrapper",
               "alg": f"{mod.name}:builder"}
    for flag, value in attacks.items():
        folder = _with_argv(log, tmp_path / flag, lambda argv: _replaced(argv, flag, value))  # noqa: B023
        with pytest.raises(TrustError, match=rf"--resume: the run in .* used --{flag}={value}; pass --{flag}={value} "
                                             rf"to (import {mod.name}|build it)"):
            run.main([f"--resume={folder}", f"--save_path={save}"])
    assert not mod.imported()


def test_resume_writes_no_output_path_of_config_json(finished_run, tmp_path):
    log, save = finished_run
    for flag, target in (("save_path", tmp_path / "elsewhere.zip"), ("play_video", tmp_path / "videos")):
        folder = _with_argv(log, tmp_path / flag, lambda argv: _replaced(argv, flag, str(target)))  # noqa: B023
        given = [f"--save_path={save}"] if flag != "save_path" else []
        with pytest.raises(TrustError, match=rf"used --{flag}={target}; pass --{flag}={target} to write there"):
            run.main([f"--resume={folder}", *given])
        assert not target.exists()
    with pytest.raises(TrustError, match=rf"--save_path={save}; --save_path=other.zip disagrees"):
        run.main([f"--resume={log}", "--save_path=other.zip"])


def test_resume_with_the_code_named_again_works(marked, tmp_path, capsys):
    mod = marked()
    log, save = str(tmp_path / "log"), str(tmp_path / "model.zip")
    network = f"--network={mod.name}:builder"
    run.main(["--alg=ppo2", "--env=IdentityDiscrete-v0", "--nsteps=32", "--num_timesteps=64", "--checkpoint_freq=32",
              network, *FAST, f"--log_path={log}", f"--save_path={save}"])
    os.unlink(save)
    both = f"{network} --save_path={save}"
    with pytest.raises(TrustError, match=rf"used {both}; pass {both} to import {mod.name} and write there \("):
        run.main([f"--resume={log}"])  # one error names both flags
    with pytest.raises(TrustError, match=rf"used {network}; pass {network} to import {mod.name} \("):
        run.main([f"--resume={log}", f"--save_path={save}"])
    capsys.readouterr()
    model = run.main([f"--resume={log}", network, f"--save_path={save}"])
    assert "resumed from step 64" in capsys.readouterr().out
    assert model.num_timesteps == 64 and os.path.isfile(save)

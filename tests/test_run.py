"""The runner end to end with tests/fake_alg.py (no TensorFlow), and run_util's lookups."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import run
import run_util
from algos.base import algorithm_names
from common.errors import UserError
from run_util import UsageError, get_env_type
from runner.config import algorithm_table
from tests import fake_alg
from tests.process_tree import descendants, running

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_ALG = "tests.fake_alg:learn"
FAKE = f"--alg={FAKE_ALG}"


@pytest.fixture
def env_module(tmp_path, monkeypatch):
    """A module that exists only in this test and registers 'TestOnlyEnv-v0' on import."""
    (tmp_path / "only_in_test_envs.py").write_text(textwrap.dedent("""
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv
        from gymnasium.envs.registration import register, registry

        class TinyEnv(CartPoleEnv):
            pass

        if "TestOnlyEnv-v0" not in registry:
            register(id="TestOnlyEnv-v0", entry_point="only_in_test_envs:TinyEnv", max_episode_steps=20)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "only_in_test_envs"


@pytest.mark.parametrize(("env_id", "expected"), [
    ("CartPole-v1", "classic_control"), ("Pendulum-v1", "classic_control"), ("FrozenLake-v1", "toy_text"),
    ("Blackjack-v1", "toy_text"), ("IdentityDiscrete-v0", "envs"), ("DictObs-v0", "envs"),
    ("HalfCheetah-v5", "mujoco"), ("LunarLander-v3", "box2d"),
])
def test_get_env_type(env_id: str, expected: str) -> None:
    assert get_env_type(env_id) == (expected, env_id)


def test_get_env_type_module_form_and_override(env_module: str) -> None:
    assert get_env_type(f"{env_module}:TestOnlyEnv-v0") == ("only_in_test_envs", "TestOnlyEnv-v0")
    assert get_env_type("CartPole-v1", env_type="mine") == ("mine", "CartPole-v1")


@pytest.mark.parametrize(("env", "message"), [
    ("CartPol-v1", "unknown env id 'CartPol-v1'; closest registered ids: CartPole-v1"),
    ("cartpole-v1", "closest registered ids: CartPole-v1"),
    ("no_such_module_xyz:Foo-v0", "module 'no_such_module_xyz' (from --env=no_such_module_xyz:Foo-v0) does not import"),
    ("NotAGameNoFrameskip-v4", "unknown env id 'NotAGameNoFrameskip-v4'"),
    ("", "no env given"),
])
def test_get_env_type_errors(env: str, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        get_env_type(env)


def test_an_atari_id_without_ale_py_says_how_to_get_it(monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ale_py", None)  # as if ale-py were not installed
    with pytest.raises(UsageError, match="looks like an Atari env, which needs ale-py"):
        get_env_type("NotAGameNoFrameskip-v4")


def test_unknown_algorithm_lists_known_ones() -> None:
    with pytest.raises(UsageError) as e:
        run_util.get_learn_function("nope")
    assert "unknown algorithm 'nope'" in str(e.value)
    assert "known: " in str(e.value)
    for alg in algorithm_names():
        assert alg in str(e.value)


def test_external_algorithm_defaults_come_from_its_module() -> None:
    _, entries = algorithm_table(FAKE_ALG, "envs", "IdentityDiscrete-v0")
    assert [dict(e) for _, e in entries] == [{"lr": 0.5}]
    _, entries = algorithm_table(FAKE_ALG, "atari", "PongNoFrameskip-v4")
    assert [dict(e) for _, e in entries] == [{}]


def _main(tmp_path, *extra: str) -> fake_alg.FakeModel:
    fake_alg.CALLS.clear()
    return run.main([FAKE, "--num_timesteps=64", "--seed=1", f"--log_path={tmp_path}", "--log_format=csv",
                     *extra])


def test_main_trains_with_defaults_overrides_and_writes_config(tmp_path) -> None:
    model = _main(tmp_path, "--env=IdentityDiscrete-v0", "--nsteps", "8", "--use_bias=False",
                  "--layers=[32, 32]", "--num_env=2")
    call = fake_alg.CALLS[-1]
    assert call["lr"] == 0.5  # from fake_alg.defaults("envs")
    assert (call["nsteps"], call["use_bias"], call["layers"], call["num_envs"]) == (8, False, [32, 32], 2)
    assert (call["total_timesteps"], call["seed"]) == (64, 1)
    assert model.config is not None
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["learn_kwargs"] == {"lr": 0.5, "nsteps": 8, "use_bias": False, "layers": [32, 32],
                                      "network": None}
    assert config["env_type"] == "envs"
    assert sorted(f for f in os.listdir(tmp_path) if not f.startswith(".")) == [
        "0.0.monitor.csv", "0.1.monitor.csv", "config.json", "model.zip", "progress.csv"]
    rows = (tmp_path / "progress.csv").read_text().splitlines()
    assert rows[0] == "rollout/ep_rew_mean,time/total_timesteps" and rows[-1].endswith(",64")


def test_main_coerces_integral_floats_and_cli_beats_defaults(tmp_path) -> None:
    _main(tmp_path, "--env=IdentityDiscrete-v0", "--nsteps=1e1", "--lr=1")
    assert fake_alg.CALLS[-1]["nsteps"] == 10 and isinstance(fake_alg.CALLS[-1]["nsteps"], int)
    assert fake_alg.CALLS[-1]["lr"] == 1


@pytest.mark.parametrize(("argv", "message"), [
    (["--env=CartPole-v1", "--lrr=3"], "does not accept --lrr; close matches: lr"),
    (["--env=CartPole-v1", "--lr=fast"], "--lr expects float, got str 'fast'"),
    (["--env=CartPole-v1", "--use_bias=1"], "--use_bias expects bool, got int 1"),
    (["--env=CartPole-v1", "--nsteps=2.5"], "--nsteps expects int, got float 2.5"),
    (["--env=CartPole-v1", "--activation=3"], "--activation expects str, got int 3"),
    (["--env=CartPole-v1", "--play_episode=3"], "does not accept --play_episode; close matches: --play_episodes"),
    (["--env=CartPole-v1", "--play", "--num_timesteps=0"], "--play with --num_timesteps=0 needs --load_path"),
    (["--env=CartPole-v1", "--load_path=/no/such/model.zip"], "--load_path /no/such/model.zip: no such file"),
    (["--env=CartPole-v1", "--save_path=/proc/nope/m.zip"], "--save_path /proc/nope: cannot write there"),
    (["--env=CartPole-v1", "--log_path=/proc/nope"], "--log_path /proc/nope: cannot write there"),
])
def test_bad_input_raises_one_line_user_error_before_training(argv: list[str], message: str) -> None:
    fake_alg.CALLS.clear()
    with pytest.raises(UserError) as e:
        run.main([FAKE, *argv])
    assert message in str(e.value)
    assert "\n" not in str(e.value)
    assert fake_alg.CALLS == []


def _cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "run", *argv], check=False, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_command_line_errors_are_one_line_and_exit_2() -> None:
    proc = _cli(FAKE, "--env=CartPol-v1")
    assert proc.returncode == 2
    assert proc.stderr.startswith("run: error: unknown env id 'CartPol-v1'")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    proc = _cli(FAKE, "--env=CartPole-v1", "--num_env=0")
    assert (proc.returncode, proc.stderr) == (2, "run: error: argument --num_env: must be >= 1, got 0\n")


def test_help_lists_every_flag_with_a_meaning() -> None:
    proc = _cli("--help")
    assert proc.returncode == 0
    parser = run.common_arg_parser()
    flags = {a.option_strings[0] for a in parser._actions}
    required = {"--env", "--env_type", "--seed", "--alg", "--num_timesteps", "--network", "--gamestate",
                "--num_env", "--reward_scale", "--save_path", "--save_video_interval", "--save_video_length",
                "--log_path", "--play", "--load_path", "--vec_env", "--in_series", "--log_format",
                "--no_progress", "--play_episodes", "--stochastic", "--play_video", "--no_render"}
    assert required <= flags
    for action in parser._actions:
        if action.dest != "help":
            assert action.option_strings[0] in proc.stdout
            assert action.help and "\n" not in action.help


def test_help_does_not_import_tensorflow() -> None:
    code = "import sys, run; run.common_arg_parser(); assert 'tensorflow' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, timeout=60).returncode == 0


def test_ctrl_c_saves_the_model_and_exits_130(tmp_path) -> None:
    save = tmp_path / "m.zip"
    proc = _cli(FAKE, "--env=CartPole-v1", "--num_timesteps=1000", f"--log_path={tmp_path}", "--log_format=csv",
                f"--save_path={save}", "--interrupt_at=32")
    assert proc.returncode == 130
    assert f"run: interrupted; model saved to {save}" in proc.stderr
    assert fake_alg.load(str(save)).config["total_timesteps"] == 1000


@pytest.mark.parametrize(("name", "status"), [("SIGTERM", 143), ("SIGHUP", 129)])
def test_sigterm_and_sighup_save_the_model_like_ctrl_c(tmp_path, name: str, status: int) -> None:
    save = tmp_path / "m.zip"
    proc = _cli(FAKE, "--env=CartPole-v1", "--num_timesteps=1000", f"--log_path={tmp_path}", "--log_format=csv",
                f"--save_path={save}", "--signal_at=32", f"--signal_name={name}")
    assert proc.returncode == status
    assert proc.stderr.strip().splitlines()[-1] == f"run: terminated ({name}); model saved to {save}"
    assert fake_alg.load(str(save)).config["total_timesteps"] == 1000


def test_sigterm_from_outside_leaves_no_worker_process(tmp_path) -> None:
    save = tmp_path / "m.zip"
    proc = subprocess.Popen([sys.executable, "-m", "run", "--alg=ppo2", "--env=CartPole-v1", "--num_env=2",
                             "--vec_env=subproc", "--num_timesteps=1e7", f"--log_path={tmp_path}", "--log_format=csv",
                             f"--save_path={save}", "--no_progress"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    progress = tmp_path / "progress.csv"
    while not (progress.exists() and len(progress.read_text().splitlines()) > 1) and time.time() < deadline:
        time.sleep(0.5)  # until training has logged
    children = descendants(proc.pid)
    assert children, "the subprocess workers should be running"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert err.count(f"run: terminated (SIGTERM); model saved to {save}\n") == 1, err[-600:]  # TF logs aside
    assert save.exists()
    time.sleep(1)
    assert [pid for pid in children if running(pid)] == []


def test_save_path_that_is_a_link_or_device_is_refused(tmp_path) -> None:
    link = tmp_path / "link.zip"
    link.symlink_to(tmp_path / "target.zip")
    for path in (link, "/dev/null"):
        with pytest.raises(UsageError, match="is (a symbolic link|a character device), not a regular file"):
            run.main([FAKE, "--env=CartPole-v1", f"--save_path={path}"])


def test_save_then_play_from_file(tmp_path, capsys) -> None:
    save = str(tmp_path / "m.zip")
    _main(tmp_path, "--env=CartPole-v1", f"--save_path={save}")
    capsys.readouterr()
    model = run.main([FAKE, "--env=CartPole-v1", "--num_timesteps=0", f"--load_path={save}", "--play",
                      "--play_episodes=3", f"--log_path={tmp_path}", "--log_format=csv", "--seed=0"])
    out = capsys.readouterr().out
    assert isinstance(model, fake_alg.FakeModel)
    lines = [ln for ln in out.splitlines() if ln.startswith("episode ")]
    assert len(lines) == 3
    assert "played 3 episodes" in out


def test_play_with_model_for_another_env_fails_with_one_line(tmp_path) -> None:
    save = str(tmp_path / "m.zip")
    _main(tmp_path, "--env=CartPole-v1", f"--save_path={save}")
    proc = _cli(FAKE, "--env=IdentityBox-v0", "--num_timesteps=0", f"--load_path={save}", "--play",
                f"--log_path={tmp_path}", "--log_format=csv")
    assert proc.returncode == 2
    assert proc.stderr.startswith("run: error: model was trained on observation space Box(")
    assert proc.stderr.count("\n") == 1


def test_train_accepts_an_object_with_some_of_the_flags(csv_log_dir):
    """As in baselines' tutorials: a small class with a few flags; the rest take the command line's defaults."""

    class Args:
        env = "envs:IdentityDiscrete-v0"
        alg = "tests.fake_alg:learn"
        num_timesteps = 64

    model, env = run.train(Args(), {})
    env.close()
    assert model is not None and env.num_envs == 1


def test_a_second_run_into_a_busy_or_used_log_folder_is_refused(tmp_path) -> None:
    log = tmp_path / "log"
    busy = subprocess.Popen([sys.executable, "-m", "run", FAKE, "--env=CartPole-v1", "--num_timesteps=1e9",
                             f"--log_path={log}", "--log_format=csv"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not ((log / "progress.csv").exists() and (log / "progress.csv").stat().st_size) and time.time() < deadline:
            time.sleep(0.2)  # until the busy run has logged (an empty progress.csv holds no run)
        with pytest.raises(UsageError, match=rf"is in use by another run \(pid {busy.pid}\)"):
            run.main([FAKE, "--env=CartPole-v1", "--num_timesteps=64", f"--log_path={log}"])
    finally:
        busy.terminate()
        busy.wait(timeout=60)
    before = (log / "progress.csv").read_text()
    proc = _cli(FAKE, "--env=CartPole-v1", "--num_timesteps=64", f"--log_path={log}")
    assert proc.returncode == 2 and "already holds a run (progress.csv)" in proc.stderr
    assert (log / "progress.csv").read_text() == before


@pytest.mark.parametrize(("flag", "message"), [
    ("--num_hidden=-1", "--num_hidden must be at least 1 (algos/hyperparameters.py NETWORK_RANGES), got -1"),
    ("--nsteps=1e12", "exceeds total_timesteps (1000): no update would run"),
    ("--save_path=", "--save_path is empty"),
])
def test_sizes_that_cannot_work_are_one_line(flag: str, message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)) as e:
        run.main(["--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=1000", flag, "--log_format=csv"])
    assert "\n" not in str(e.value)


def _in_folder(folder, *command: str, **env: str) -> subprocess.CompletedProcess:
    """``command`` run in ``folder`` with this project importable, stdout a pipe, RUNNER_LOGDIR unset."""
    environ = {k: v for k, v in os.environ.items() if k != "RUNNER_LOGDIR"}
    environ.update(PYTHONPATH=ROOT, **env)
    return subprocess.run(command, check=False, cwd=folder, env=environ, capture_output=True, text=True, timeout=120)


def test_a_script_run_twice_logs_into_numbered_folders_and_ends_with_the_next_command(tmp_path) -> None:
    """No --log_path: ./logs/<alg>/<env>_<N> (N = 1 + the highest), printed first, holding the model;
    stdout that is not a terminal gets few tables (progress.csv every row); the last line is a command."""
    script = tmp_path / "train.py"
    script.write_text(f"import run\nrun.main([{FAKE!r}, '--env=CartPole-v1', '--num_timesteps=512', '--nsteps=1'])\n")
    (tmp_path / "logs" / FAKE_ALG.replace(":", "-") / "CartPole-v1_7").mkdir(parents=True)  # a user's old run
    for n in (8, 9):
        proc = _in_folder(tmp_path, sys.executable, str(script))
        assert proc.returncode == 0, proc.stderr
        folder = tmp_path / "logs" / FAKE_ALG.replace(":", "-") / f"CartPole-v1_{n}"
        lines = proc.stdout.splitlines()
        assert lines[0] == f"Logging to {folder}"
        assert (folder / "model.zip").is_file()
        assert len((folder / "progress.csv").read_text().splitlines()) == 1 + 512
        tables = proc.stdout.count("| time/total_timesteps")
        assert 1 <= tables <= 3 and len(lines) < 60, proc.stdout  # the first table, the last, one per 10 s
        assert proc.stdout.rsplit("| time/total_timesteps", 1)[1].split("|")[1].strip() == "512"
        assert lines[-1] == f"  plot:     python -m plot logs/{FAKE_ALG.replace(':', '-')}/CartPole-v1_{n}"
        load = f"--alg={FAKE_ALG} --load_path=logs/{FAKE_ALG.replace(':', '-')}/CartPole-v1_{n}/model.zip"
        assert f"  evaluate: python -m run {load} --num_timesteps=0 --eval_episodes=10" in lines


def test_play_and_file_evaluation_create_no_folder(tmp_path) -> None:
    """--play and --num_timesteps=0 --load_path=F write no log folder: none in ./logs, none in the temp folder."""
    model = tmp_path / "m.zip"
    _main(tmp_path / "log", "--env=CartPole-v1", f"--save_path={model}")
    work, temp = tmp_path / "work", tmp_path / "temp"
    work.mkdir()
    temp.mkdir()
    for extra in (["--play", "--play_episodes=1", "--no_render"], ["--eval_episodes=2"]):
        proc = _in_folder(work, sys.executable, "-m", "run", FAKE, "--env=CartPole-v1", f"--load_path={model}", "--num_timesteps=0",
                          *extra, TMPDIR=str(temp))
        assert proc.returncode == 0, proc.stderr
    assert os.listdir(work) == [] and os.listdir(temp) == []


def test_a_run_without_seed_draws_one_records_it_and_repeats_with_it(tmp_path, capsys) -> None:
    """The drawn seed is printed and recorded (config.json, the model file); --seed=N repeats the run exactly."""
    from common.files.model_file import load_model_file

    argv = ["--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=256", "--nsteps=64", "--num_hidden=8",
            "--log_format=stdout,csv"]
    run.main([*argv, f"--log_path={tmp_path / 'a'}"])
    drawn = re.search(r"^Seed (\d+) \(drawn; --seed=\1 repeats this run\)$", capsys.readouterr().out, re.MULTILINE)
    seed = int(drawn[1])
    assert json.loads((tmp_path / "a" / "config.json").read_text())["seed"] == seed
    meta, first = load_model_file(str(tmp_path / "a" / "model.zip"))
    assert meta["hyperparameters"]["seed"] == seed
    run.main([*argv, f"--log_path={tmp_path / 'b'}", f"--seed={seed}"])
    assert "(drawn" not in capsys.readouterr().out
    again = load_model_file(str(tmp_path / "b" / "model.zip"))[1]
    assert all((first[k] == again[k]).all() for k in first)

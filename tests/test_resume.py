"""Resuming runs (``--resume=LOGDIR``) through the shared skeleton: every algorithm, killed with SIGKILL
after a training-state checkpoint and resumed, ends with arrays bit-identical to the same run
uninterrupted (identity envs, whose whole state is restorable; DummyVecEnv; one rank). Plus a kill in the
middle of a checkpoint write, and the one-line errors of bad input."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import run
from algos.base import algorithm_names
from common.files.checkpoint import CheckpointError, checkpoints
from common.files.model_file import load_model_file
from run_util import UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRASH = os.path.join(ROOT, "tests", "resume_crash.py")
N = 1024  # env steps before the checkpoint; runs go to 2N
# Small, fast settings; ppo2/a2c/trpo/deepq/qrdqn/rainbow echo a Discrete observation, ddpg/sac/td3/tqc a Box one.
SETTINGS = {
    "ppo2": ["--env=IdentityDiscrete-v0", "--nsteps=64"],
    "a2c": ["--env=IdentityDiscrete-v0", "--nsteps=16"],
    "trpo": ["--env=IdentityDiscrete-v0", "--timesteps_per_batch=128"],
    "deepq": ["--env=IdentityDiscrete-v0", "--learning_starts=200", "--prioritized_replay=True", "--param_noise=True",
              "--train_freq=16",
              "--gradient_steps=8", "--target_network_update_freq=100"],
    "qrdqn": ["--env=IdentityDiscrete-v0", "--learning_starts=200", "--n_step=2", "--train_freq=16",
              "--gradient_steps=8", "--target_network_update_freq=100", "--num_quantiles=8"],
    "rainbow": ["--env=IdentityDiscrete-v0", "--learning_starts=200", "--train_freq=16", "--gradient_steps=8",
                "--target_network_update_freq=100", "--hiddens=[16]", "--num_atoms=11"],
    "ddpg": ["--env=IdentityBox-v0", "--learning_starts=200", "--nb_rollout_steps=32", "--nb_train_steps=8",
             "--noise_type=ou_0.2,adaptive-param_0.2"],
    "sac": ["--env=IdentityBox-v0", "--learning_starts=200", "--train_freq=32", "--gradient_steps=8"],
    "td3": ["--env=IdentityBox-v0", "--learning_starts=200", "--train_freq=32", "--gradient_steps=8"],
    "tqc": ["--env=IdentityBox-v0", "--learning_starts=200", "--train_freq=32", "--gradient_steps=8"],
    "her": ["--env=BitFlipping-v0", "--learning_starts=200", "--train_freq=32", "--gradient_steps=8"],
}


def _argv(alg: str, log: str, save: str) -> list[str]:
    return [f"--alg={alg}", *SETTINGS[alg], "--num_env=2", "--seed=3", f"--num_timesteps={2 * N}",
            f"--checkpoint_freq={N}", "--num_hidden=16", "--log_format=csv,log", "--no_progress",
            f"--log_path={log}", f"--save_path={save}"]


def _crash(kill_at: int, argv: list[str], *options: str) -> None:
    proc = subprocess.run([sys.executable, CRASH, str(kill_at), *options, "--", *argv], cwd=ROOT, check=False,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]


def _rows(path: str, columns: tuple[str, ...]) -> list[tuple[str, ...]]:
    with open(path, newline="") as f:
        if path.endswith("monitor.csv"):
            f.readline()
        return [tuple(r[c] for c in columns) for r in csv.DictReader(f)]


def _assert_same_run(first: str, second: str, log_a: str, log_b: str) -> None:
    a, b = load_model_file(first)[1], load_model_file(second)[1]
    assert set(a) == set(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    for monitor in ("0.0.monitor.csv", "0.1.monitor.csv"):  # the same episodes, each once
        assert _rows(os.path.join(log_a, monitor), ("r", "l")) == _rows(os.path.join(log_b, monitor), ("r", "l"))
    steps = ("time/total_timesteps", "rollout/ep_rew_mean")
    assert _rows(os.path.join(log_a, "progress.csv"), steps) == _rows(os.path.join(log_b, "progress.csv"), steps)


_straight_runs: dict[str, tuple[str, str]] = {}


def _straight(alg: str, tmp_path_factory) -> tuple[str, str]:
    """(model file, log folder) of the uninterrupted 2N-step run of ``alg`` (made once per session)."""
    if alg not in _straight_runs:
        folder = tmp_path_factory.mktemp(f"straight-{alg}")
        run.main(_argv(alg, str(folder / "log"), str(folder / "model.zip")))
        _straight_runs[alg] = (str(folder / "model.zip"), str(folder / "log"))
    return _straight_runs[alg]


# One algorithm per loop in the default suite (on-policy, deepq, off-policy actor-critic), and rainbow (n-step
# queues, noisy layers, C51 with prioritized replay); each takes ~20-30 s on the busy 2-core machine (three
# runs, one of them a fresh process), the others run with -m slow.
DEFAULT_SUITE = ("ppo2", "deepq", "rainbow", "sac")


@pytest.mark.parametrize("alg", [a if a in DEFAULT_SUITE else pytest.param(a, marks=pytest.mark.slow)
                                 for a in algorithm_names()])
def test_killed_and_resumed_run_ends_bit_identical(alg, tmp_path, tmp_path_factory, capsys):
    """2N steps in one go == N steps, checkpoint, SIGKILL at a random later step, --resume to 2N."""
    base, straight_log = _straight(alg, tmp_path_factory)
    log, save = str(tmp_path / "crashed"), str(tmp_path / "resumed.zip")
    kill_at = int(np.random.default_rng(sum(map(ord, alg))).integers(N + 1, 2 * N - 64))
    _crash(kill_at, _argv(alg, log, save))
    assert not os.path.exists(save)
    assert [step for step, _ in checkpoints(os.path.join(log, "resume"), 0)] == [N]
    capsys.readouterr()
    run.main([f"--resume={log}", f"--save_path={save}"])
    assert f"resumed from step {N} (" in capsys.readouterr().out
    _assert_same_run(base, save, straight_log, log)


def _straight_killed_resumed(argv: list[str], tmp_path, capsys) -> str:
    """Run ``argv`` straight, then killed at step N + 300 and resumed; assert the two runs are the same.
    Returns the straight run's model file."""
    straight_log, base = str(tmp_path / "straight"), str(tmp_path / "straight.zip")
    run.main([*argv, f"--log_path={straight_log}", f"--save_path={base}"])
    log, save = str(tmp_path / "crashed"), str(tmp_path / "resumed.zip")
    _crash(N + 300, [*argv, f"--log_path={log}", f"--save_path={save}"])
    capsys.readouterr()
    run.main([f"--resume={log}", f"--save_path={save}"])
    assert f"resumed from step {N} (" in capsys.readouterr().out
    _assert_same_run(base, save, straight_log, log)
    return base


def test_dict_observation_run_resumes_bit_identical(tmp_path, capsys):
    """sac on an image key and a vector key kept as a Dict: the per-key replay, the Dict observations of
    the loop and the CNNs' weights and optimizer states resume exactly."""
    argv = ["--alg=sac", "--env=DictImage-v0", "--num_env=4", "--seed=3", f"--num_timesteps={2 * N}",
            f"--checkpoint_freq={N}", "--num_hidden=16", "--log_format=csv,log", "--no_progress",
            "--learning_starts=200", "--train_freq=64", "--gradient_steps=4", "--batch_size=16",
            "--buffer_size=4096"]
    base = _straight_killed_resumed(argv, tmp_path, capsys)
    assert any(name.startswith("actor/cnns/image/") for name in load_model_file(base)[1])


@pytest.mark.parametrize("alg", ["ppo2", pytest.param("deepq", marks=pytest.mark.slow)])
def test_masked_run_resumes_bit_identical(alg, tmp_path, capsys):
    """Action masks (the current ones, and deepq's next-state masks in the replay buffer) resume exactly."""
    masked = [f"--alg={alg}", "--env=MaskedBandit-v0", "--num_env=2", "--seed=3", f"--num_timesteps={2 * N}",
              f"--checkpoint_freq={N}", "--num_hidden=16", "--log_format=csv,log", "--no_progress",
              *(["--nsteps=64"] if alg == "ppo2" else ["--learning_starts=200", "--train_freq=16",
                                                       "--gradient_steps=8"])]
    _straight_killed_resumed(masked, tmp_path, capsys)


def test_kill_during_checkpoint_write_resumes_from_previous(tmp_path, tmp_path_factory, capsys):
    """A kill in the middle of writing the second checkpoint leaves the first intact; the run resumes from it."""
    alg = "sac"
    base, straight_log = _straight(alg, tmp_path_factory)
    log, save = str(tmp_path / "crashed"), str(tmp_path / "resumed.zip")
    _crash(2 * N, _argv(alg, log, save), "--in-checkpoint")
    folder = os.path.join(log, "resume")
    assert [step for step, _ in checkpoints(folder, 0)] == [N]
    assert any(name.startswith(".tmp-") for name in os.listdir(folder))  # the write that was cut short
    capsys.readouterr()
    run.main([f"--resume={log}", f"--save_path={save}"])
    assert f"resumed from step {N} (" in capsys.readouterr().out
    assert not any(name.startswith(".tmp-") for name in os.listdir(folder))
    _assert_same_run(base, save, straight_log, log)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A short ppo2 run with checkpoints at 256 and 512 steps (its log folder)."""
    log = str(tmp_path_factory.mktemp("done") / "log")
    run.main(["--alg=ppo2", "--env=IdentityDiscrete-v0", "--nsteps=64", "--num_env=2", "--num_timesteps=512",
              "--checkpoint_freq=256", "--num_hidden=16", "--log_format=csv", "--no_progress", "--seed=1",
              f"--log_path={log}"])
    return log


def _copy(src: str, dst: str) -> str:
    import shutil

    shutil.copytree(src, dst)
    os.unlink(os.path.join(dst, ".runner.lock"))
    return dst


def test_bad_input_is_one_line(finished_run, tmp_path):
    with pytest.raises(UsageError, match="no readable config.json"):
        run.main([f"--resume={tmp_path}"])
    with pytest.raises(UsageError, match=r"--resume: --seed=2 disagrees with the run in .* \(--seed=1\)"):
        run.main([f"--resume={finished_run}", "--seed=2"])
    with pytest.raises(UsageError, match=r"--resume: --lr=0.5 disagrees"):
        run.main([f"--resume={finished_run}", "--lr=0.5"])
    empty = _copy(finished_run, str(tmp_path / "empty"))
    for name in os.listdir(os.path.join(empty, "resume")):
        os.unlink(os.path.join(empty, "resume", name))
    with pytest.raises(CheckpointError, match="no checkpoint in"):
        run.main([f"--resume={empty}"])


def _edit_metadata(folder: str, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in the metadata of every checkpoint in ``folder``/resume."""
    for _, path in checkpoints(os.path.join(folder, "resume"), 0):
        _edit_checkpoint(path, old, new)


def _edit_checkpoint(path: str, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in the metadata of the checkpoint ``path``."""
    with zipfile.ZipFile(path) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    meta = members["metadata.json"].decode()
    assert old in meta
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, meta.replace(old, new) if name == "metadata.json" else data)


def test_checkpoint_of_another_algorithm_or_env_is_refused(finished_run, tmp_path):
    other = _copy(finished_run, str(tmp_path / "alg"))
    _edit_metadata(other, '"algorithm": "ppo2"', '"algorithm": "a2c"')
    with pytest.raises(CheckpointError, match="is a checkpoint of 'a2c', this run is ppo2"):
        run.main([f"--resume={other}"])
    other = _copy(finished_run, str(tmp_path / "env"))
    _edit_metadata(other, '"env": "IdentityDiscrete-v0"', '"env": "CartPole-v1"')
    with pytest.raises(CheckpointError, match="is a checkpoint of env 'CartPole-v1', this run is IdentityDiscrete-v0"):
        run.main([f"--resume={other}"])


def test_corrupt_newest_checkpoint_falls_back_to_previous(finished_run, tmp_path, capsys):
    copy = _copy(finished_run, str(tmp_path / "corrupt"))
    (_, path), (previous, _) = checkpoints(os.path.join(copy, "resume"), 0)
    with open(path, "r+b") as f:  # flip bytes inside an array: its checksum fails
        f.seek(os.path.getsize(path) // 2)
        f.write(b"\xff" * 16)
    run.main([f"--resume={copy}"])
    out = capsys.readouterr()
    assert os.path.basename(path) in out.err and "resuming from the previous checkpoint" in out.err
    assert "CRC" in out.err or "checksum" in out.err
    assert f"resumed from step {previous} (" in out.out
    for _, path in checkpoints(os.path.join(copy, "resume"), 0):
        with open(path, "r+b") as f:
            f.truncate(100)
    with pytest.raises(CheckpointError, match="no usable checkpoint"):
        run.main([f"--resume={copy}"])


@pytest.mark.mpi
@pytest.mark.slow
def test_mpi_ranks_checkpoint_their_own_state_and_resume(tmp_path):
    """Under mpiexec -n 2 each rank writes its own checkpoint; killed and resumed with 2 ranks the run ends
    bit-identical to the uninterrupted one; another rank count is refused in one line."""
    import shutil

    from common.mpi.mpi_launch import MPI_ENV_PREFIXES

    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec not found")
    env = {k: v for k, v in os.environ.items() if not k.startswith(MPI_ENV_PREFIXES)}

    def launch(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run([mpiexec, "-n", "2", sys.executable, *cmd], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300, check=False)

    def argv(name: str) -> list[str]:
        return _argv("ppo2", str(tmp_path / name), str(tmp_path / f"{name}.zip"))

    straight = launch("-m", "run", *argv("straight"))
    assert straight.returncode == 0, straight.stderr[-2000:]
    launch(CRASH, str(N + 300), "--", *argv("crashed"))
    for rank in (0, 1):
        assert [s for s, _ in checkpoints(str(tmp_path / "crashed" / "resume"), rank)] == [N]
    resume = [f"--resume={tmp_path / 'crashed'}", f"--save_path={tmp_path / 'crashed.zip'}"]
    one = subprocess.run([sys.executable, "-m", "run", *resume], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert one.returncode == 2 and "written by 2 MPI rank(s)" in one.stderr and len(one.stderr.splitlines()) == 1
    resumed = launch("-m", "run", *resume)
    assert resumed.returncode == 0 and f"resumed from step {N} (" in resumed.stdout, resumed.stderr[-2000:]
    _assert_same_run(str(tmp_path / "straight.zip"), str(tmp_path / "crashed.zip"), str(tmp_path / "straight"),
                     str(tmp_path / "crashed"))


@pytest.mark.parametrize("alg, settings", [
    ("ppo2", ["--env=CartPole-v1", "--nsteps=64"]),
    pytest.param("deepq", ["--env=CartPole-v1", "--learning_starts=200", "--train_freq=16", "--gradient_steps=8"],
                 marks=pytest.mark.slow),
    pytest.param("td3", ["--env=Pendulum-v1", "--learning_starts=200", "--train_freq=32", "--gradient_steps=8"],
                 marks=pytest.mark.slow),
])
def test_env_without_state_restarts_its_episodes(alg, settings, tmp_path, capsys):
    """gymnasium's envs offer no get_state: the resumed run resets them (the episodes in flight are dropped,
    never half-written) and trains to the end from the checkpoint's model, buffers and counters."""
    log, save = str(tmp_path / "log"), str(tmp_path / "model.zip")
    argv = [f"--alg={alg}", *settings, "--num_env=2", "--seed=3", f"--num_timesteps={2 * N}",
            f"--checkpoint_freq={N}", "--num_hidden=16", "--log_format=csv", "--no_progress",
            f"--log_path={log}", f"--save_path={save}"]
    _crash(N + 512, argv)
    with open(os.path.join(log, "0.0.monitor.csv"), "rb") as f:
        crashed = f.read()
    checkpoint = load_model_file(checkpoints(os.path.join(log, "resume"), 0)[0][1])[0]
    kept = checkpoint["log_files"]["0.0.monitor.csv"]  # the episodes written when the checkpoint was taken
    capsys.readouterr()
    run.main([f"--resume={log}", f"--save_path={save}"])
    assert f"resumed from step {N} (" in capsys.readouterr().out
    model = load_model_file(save)[0]
    assert model["num_timesteps"] == 2 * N
    with open(os.path.join(log, "0.0.monitor.csv"), "rb") as f:
        final = f.read()
    assert final[:kept] == crashed[:kept] and crashed[:kept].endswith(b"\n") and len(crashed) > kept
    lengths = [int(r[0]) for r in _rows(os.path.join(log, "0.0.monitor.csv"), ("l",))]
    assert sum(lengths) <= 2 * N // 2  # every row a whole episode of this env, none counted twice


@pytest.mark.parametrize(("step", "shown"), [('"abc"', "'abc'"), ("Infinity", "inf")])
def test_a_checkpoint_whose_step_is_not_a_count_is_unusable(finished_run, tmp_path, capsys, step, shown):
    copy = _copy(finished_run, str(tmp_path / "step"))
    (_, newest), (previous, _) = checkpoints(os.path.join(copy, "resume"), 0)
    _edit_checkpoint(newest, '"step": 512', f'"step": {step}')
    run.main([f"--resume={copy}"])  # the previous checkpoint: nothing lost but those steps
    out = capsys.readouterr()
    assert f"{os.path.basename(newest)}' has step {shown}, not a whole number of env steps" in out.err
    assert f"resumed from step {previous} (" in out.out
    both = _copy(finished_run, str(tmp_path / "both"))
    _edit_metadata(both, '"step": ', f'"step": {step}, "was": ')
    with pytest.raises(CheckpointError, match=f"no usable checkpoint in .*: .* has step {shown}, not a whole number"):
        run.main([f"--resume={both}"])


def test_monitor_rows_that_are_not_episodes_are_left_out_on_resume(finished_run, tmp_path, capsys):
    copy = _copy(finished_run, str(tmp_path / "monitor"))
    for name, length in (("0.0.monitor.csv", "abc"), ("0.1.monitor.csv", "inf")):
        with open(os.path.join(copy, name), "a") as f:
            f.write(f"1.0,{length},3.0\n")
    run.main([f"--resume={copy}"])
    assert "resumed from step 512 (" in capsys.readouterr().out


def test_interrupted_run_resumes_from_the_interrupt_with_nothing_lost(tmp_path, tmp_path_factory, capsys):
    """Ctrl-C in the middle of a rollout: the run finishes that update, writes a training-state checkpoint and
    exits 130; --resume continues from that step (0 steps lost) and ends as the run uninterrupted."""
    base, straight_log = _straight("ppo2", tmp_path_factory)
    log, save = str(tmp_path / "interrupted"), str(tmp_path / "resumed.zip")
    proc = subprocess.run([sys.executable, CRASH, "1300", "--signal=SIGINT", "--", *_argv("ppo2", log, save)],
                          cwd=ROOT, check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130, proc.stderr[-2000:]
    step = 11 * 128  # the end of the update (nsteps 64 x 2 envs) in which the signal came
    assert f"run: training state of step {step} saved; continue with: python -m run --resume={log}" in proc.stderr
    capsys.readouterr()
    run.main([f"--resume={log}", f"--save_path={save}"])
    assert f"resumed from step {step} (0 steps lost)" in capsys.readouterr().out
    _assert_same_run(base, save, straight_log, log)

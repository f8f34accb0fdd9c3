"""bench/peers.py without its peers: CleanRL's command lines match each case's settings, a missing peer is
one line, and the table puts each side's medians beside ours. No torch, SB3 or CleanRL needed."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("bench_peers", os.path.join(ROOT, "bench", "peers.py"))
peers = sys.modules.setdefault("bench_peers", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(peers)

CLEANRL_CASES = [c for c in peers.CASES if c.cleanrl is not None]


def _flags(argv: list[str]) -> dict[str, Any]:
    """``--name=value`` as {name: value}, ``--name`` as True and ``--no-name`` as False."""
    out: dict[str, Any] = {}
    for arg in argv:
        name, _, value = arg[2:].partition("=")
        if value:
            out[name] = value
        elif name.startswith("no-"):
            out[name[3:]] = False
        else:
            out[name] = True
    return out


def _argv(name: str, seed: int = 3) -> list[str]:
    case = next(c for c in peers.CASES if c.name == name)
    return peers.cleanrl_argv(case, seed, "/venv/bin/python", "/src/cleanrl")


def test_cleanrl_covers_the_cases_it_has_scripts_for() -> None:
    assert {c.name: c.cleanrl.script for c in CLEANRL_CASES} == {
        "ppo2-cartpole": "cleanrl/ppo.py", "deepq-cartpole": "cleanrl/dqn.py",
        "ddpg-pendulum": "cleanrl/ddpg_continuous_action.py", "td3-pendulum": "cleanrl/td3_continuous_action.py",
        "sac-pendulum": "cleanrl/sac_continuous_action.py"}


@pytest.mark.parametrize("case", CLEANRL_CASES, ids=lambda c: c.name)
def test_cleanrl_argv_runs_the_script_on_the_case(case: Any) -> None:
    argv = peers.cleanrl_argv(case, 3, "/venv/bin/python", "/src/cleanrl")
    assert argv[:3] == ["/venv/bin/python", "-u", os.path.join("/src/cleanrl", case.cleanrl.script)]
    flags = _flags(argv[3:])
    assert flags["env-id"] == case.env and flags["total-timesteps"] == str(case.timesteps)
    assert flags["seed"] == "3" and flags["cuda"] is False
    assert flags.get("save-model", False) is (case.cleanrl.model is not None)
    assert len(flags) == len(argv) - 3  # no flag twice


def test_cleanrl_ppo_matches_the_zoo_settings() -> None:
    f, zoo = _flags(_argv("ppo2-cartpole")[3:]), peers.CASES[0].peer
    assert int(f["num-envs"]) == zoo["n_envs"] and int(f["num-steps"]) == zoo["kwargs"]["n_steps"]
    # one minibatch of num_envs * num_steps = SB3's batch_size
    assert int(f["num-envs"]) * int(f["num-steps"]) // int(f["num-minibatches"]) == zoo["kwargs"]["batch_size"]
    assert int(f["update-epochs"]) == zoo["kwargs"]["n_epochs"]
    assert float(f["gae-lambda"]) == zoo["kwargs"]["gae_lambda"] and float(f["gamma"]) == zoo["kwargs"]["gamma"]
    assert float(f["learning-rate"]) == 1e-3 and f["anneal-lr"] is True  # lin_1e-3
    assert f["clip-vloss"] is False and float(f["ent-coef"]) == 0.0  # SB3 clips no value loss


def test_cleanrl_dqn_matches_the_zoo_settings() -> None:
    f = _flags(_argv("deepq-cartpole")[3:])
    zoo = next(c for c in peers.CASES if c.name == "deepq-cartpole").peer["kwargs"]
    assert float(f["learning-rate"]) == zoo["learning_rate"] and int(f["batch-size"]) == zoo["batch_size"]
    assert int(f["buffer-size"]) == zoo["buffer_size"] and int(f["learning-starts"]) == zoo["learning_starts"]
    assert float(f["end-e"]) == zoo["exploration_final_eps"]
    assert float(f["exploration-fraction"]) == zoo["exploration_fraction"]
    # as many gradient steps per env step: one every train-frequency steps = gradient_steps every train_freq
    assert int(f["train-frequency"]) == zoo["train_freq"] // zoo["gradient_steps"]
    assert int(f["target-network-frequency"]) == zoo["target_update_interval"]


@pytest.mark.parametrize("name", ["ddpg-pendulum", "td3-pendulum", "sac-pendulum"])
def test_cleanrl_off_policy_matches_the_zoo_settings(name: str) -> None:
    f = _flags(_argv(name)[3:])
    zoo = next(c for c in peers.CASES if c.name == name).peer["kwargs"]
    assert float(f["gamma"]) == zoo.get("gamma", 0.99)
    lr = float(f.get("learning-rate", f.get("q-lr")))
    assert lr == zoo["learning_rate"] and float(f.get("policy-lr", lr)) == lr
    assert int(f.get("learning-starts")) == zoo.get("learning_starts", 100)  # SB3's default: 100
    assert int(f.get("buffer-size", 1_000_000)) == zoo.get("buffer_size", 1_000_000)
    assert int(f["batch-size"]) == 256 and float(f["tau"]) == 0.005
    assert int(f["policy-frequency"]) == (2 if name == "td3-pendulum" else 1)  # TD3's delay, none otherwise


def test_last_training_mean_reads_the_scripts_episode_lines() -> None:
    out = "SPS: 10\n" + "".join(f"global_step={i}, episodic_return=[{i}.]\n" for i in range(1, 13)) + "SPS: 12\n"
    assert peers._last_training_mean(out) == pytest.approx(sum(range(3, 13)) / 10)
    assert peers._last_training_mean("global_step=5, episodic_return=[-123.5]\n") == -123.5


@pytest.mark.parametrize("argv, hint", [
    (["--peers", "cleanrl", "--cleanrl_python", "/nonexistent/python"], "bench/requirements-cleanrl.txt"),
    (["--peers", "cleanrl", "--cleanrl_python", sys.executable, "--cleanrl_dir", "/nonexistent"],
     "bench/requirements-cleanrl.txt"),
    (["--peers", "sb3", "--peer_python", "/nonexistent/python"], "bench/requirements-peers.txt"),
])
def test_a_missing_peer_is_one_line_and_exit_2(argv: list[str], hint: str, capsys: Any) -> None:
    assert peers.main([*argv, "--only", "ppo2-cartpole"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith("peers: error: no /nonexistent") and hint in out.err


def test_a_peer_not_asked_for_is_not_needed() -> None:
    args = peers._parser().parse_args(["--peers", "sb3", "--peer_python", sys.executable,
                                       "--cleanrl_python", "/nonexistent/python"])
    assert [s.name for s in peers.sides_from(args)] == ["ours", "SB3"]


def test_table_rows_per_side_with_ratios_to_ours() -> None:
    cases = [c for c in peers.CASES if c.name in ("ppo2-cartpole", "a2c-cartpole")]
    sides = [peers.Ours(), peers.StableBaselines3("python"), peers.CleanRLScripts("python", "src")]
    runs = {("ppo2-cartpole", "ours"): [peers.Run(10.0, 5.0, 500.0, 8.0)],
            ("ppo2-cartpole", "SB3"): [peers.Run(30.0, 20.0, 500.0, 24.0)],
            ("ppo2-cartpole", "CleanRL"): [peers.Run(20.0, 10.0, 480.5, 16.0, eval_kind="train")],
            ("a2c-cartpole", "ours"): [peers.Run(40.0, 20.0, 500.0, 32.0)],
            ("a2c-cartpole", "SB3"): [peers.Run(20.0, 10.0, 500.0, 16.0)]}
    rows = peers.table(cases, sides, runs)
    assert rows[2:] == [
        "| ppo2-cartpole | ours | 100,000 | 10.0 s | 5.0 s | 20,000 | 8.0 s | 500.0 | - | - | - |",
        "| ppo2-cartpole | SB3 | 100,000 | 30.0 s | 20.0 s | 5,000 | 24.0 s | 500.0 | 3.00x | 4.00x | 3.00x |",
        ("| ppo2-cartpole | CleanRL | 100,000 | 20.0 s | 10.0 s | 10,000 | 16.0 s | 480.5 (train) | 2.00x | 2.00x "
         "| 2.00x |"),
        "| a2c-cartpole | ours | 500,000 | 40.0 s | 20.0 s | 25,000 | 32.0 s | 500.0 | - | - | - |",
        "| a2c-cartpole | SB3 | 500,000 | 20.0 s | 10.0 s | 50,000 | 16.0 s | 500.0 | 0.50x | 0.50x | 0.50x |"]


def test_sides_take_turns_going_first() -> None:
    sides = ["ours", "SB3", "CleanRL"]
    assert [peers._rotated(sides, r)[0] for r in range(4)] == ["ours", "SB3", "CleanRL", "ours"]

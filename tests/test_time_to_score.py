"""bench/time_to_score.py without running any side: checkpoints found and timed by their files, the first
checkpoint at the score, medians over seeds with seeds that never reach it, the zoo's entries of every case."""

from __future__ import annotations

import importlib.util
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("bench_time_to_score", os.path.join(ROOT, "bench", "time_to_score.py"))
tts = sys.modules.setdefault("bench_time_to_score", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(tts)

CASE = tts.Case("x-cartpole", "CartPole-v1", "ppo2", 475, 1000, ("ppo", "CartPole-v1"))


def test_checkpoints_are_timed_by_their_files_and_the_earliest_of_a_step_is_kept(tmp_path):
    for name, mtime in [("0000002000.zip", 112.0), ("0000001000.zip", 105.0), ("0000002000.pt", 1.0),
                        ("notes.zip", 1.0)]:
        (tmp_path / name).write_bytes(b"")
        os.utime(tmp_path / name, (mtime, mtime))
    found = tts.checkpoints_in(str(tmp_path), ".zip", started=100.0)
    assert [(c.steps, c.seconds) for c in found] == [(1000, 5.0), (2000, 12.0)]
    final = tts.Checkpoint(2000, 13.0, "final.zip")
    assert [c.seconds for c in tts.earliest_per_step([final, *found])] == [5.0, 12.0]


def test_time_to_score_is_the_first_checkpoint_at_or_above_it():
    outcome = tts.Outcome([(1000, 5.0, 100.0), (2000, 9.0, 475.0), (3000, 12.0, 300.0), (4000, 15.0, 500.0)])
    assert outcome.reached(475) == (2000, 9.0)
    assert outcome.reached(501) is None
    assert (outcome.final, outcome.best) == (500.0, 500.0)


def test_summary_counts_seeds_that_never_reach_the_score_as_slowest():
    fast = tts.Outcome([(1000, 4.0, 480.0)])
    never = tts.Outcome([(1000, 4.0, 200.0)])
    runs = {"ours": [fast, fast, never], "SB3": [tts.Outcome([(1000, 10.0, 500.0)]), never, never]}
    assert tts.median_time(runs["ours"], 475) == 4.0
    assert math.isnan(tts.median_time(runs["SB3"], 475))
    row = tts.summary_row(CASE, ["ours", "SB3", "CleanRL"], runs)
    assert row == "| x-cartpole | 475 | 4.0 s | not reached | - | - | - | 2/3, 1/3, - |"
    runs["SB3"] = [tts.Outcome([(1000, 10.0, 500.0)])] * 3
    assert "| 10.0 s | - | 2.50x | - |" in tts.summary_row(CASE, ["ours", "SB3", "CleanRL"], runs)


def test_every_case_has_its_zoo_entry_and_budget():
    for case in tts.CASES:
        entry = tts.zoo_entry(case)
        assert tts.budget_of(case) == entry["n_timesteps"] > case.every
    assert tts.budget_of(tts.CASES[0], 512) == 512
    assert tts.cleanrl_flags(CASE, 3, 512) == ["--env-id=CartPole-v1", "--seed=3", "--total-timesteps=512",
                                               "--no-cuda"]


def test_ours_args_reach_our_command_and_are_named_as_a_trial(tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(tts, "_run", lambda cmd, cwd, env=None: commands.append(cmd) or "")
    args = tts._parser().parse_args(["sac-pendulum", "--peers", "--ours_args", "--num_hidden=64 --batch_size=64"])
    (ours,) = tts.sides_from(args)
    ours.checkpoints(next(c for c in tts.CASES if c.name == "sac-pendulum"), 100, str(tmp_path), 1000)
    assert commands[0][-2:] == ["--num_hidden=64", "--batch_size=64"]
    assert "not the shipped entry" in ours.describe()
    shipped = tts.sides_from(tts._parser().parse_args(["sac-pendulum", "--peers"]))[0]
    assert shipped.describe() == ""

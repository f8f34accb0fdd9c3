"""bench/suite.py's report: rows of runs made elsewhere and hand-written notes survive a rewrite."""
import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

from bench import suite

HEADER = "| alg | env | env steps | seeds | median | min..max | per seed | wall (s) | steps/s | reference | commit |"
PONG_ROW = ("| ppo2 | PongNoFrameskip-v4 | 2,500,000 | 1 | 13.7 | 13.7..13.7 | 0: 13.7 | 8393 | 298 | "
            "+18 (target; 10M frames) | 2560780 |")
PONG_SPEC = next(s for s in suite.SUITES["atari-short"] if (s.alg, s.env) == ("ppo2", "PongNoFrameskip-v4"))
PONG_CMD = "    " + suite.generic_command(PONG_SPEC)


def _doc(tmp_path) -> str:
    path = tmp_path / "benchmarks.md"
    path.write_text("# Benchmarks\n\n## Suite `atari-short`\n\nintro\n\n" + HEADER + "\n| --- |\n" + PONG_ROW + "\n"
                    "| deepq | PongNoFrameskip-v4 | 1,000,000 | 0 | not run | | | | |  | |\n\n"
                    "Notes by hand.\n\nMore notes.\n\n" + suite.COMMANDS_HEADING + "\n\n" + PONG_CMD + "\n\n"
                    "## Suite `classic`\n\nother section\n")
    return str(path)


def _finished_run(root: str, alg: str, env: str, final: float, seed: int = 0) -> None:
    log = os.path.join(root, alg, env, f"seed{seed}", "log")
    os.makedirs(log)
    with open(os.path.join(log, "evaluations.csv"), "w") as f:
        f.write(f"timesteps,return_mean,return_std,length_mean,episodes,seconds\n1000,{final - 5},1,10,10,1\n"
                f"2000,{final},1,10,10,1\n")
    with open(os.path.join(root, alg, env, f"seed{seed}", "run.json"), "w") as f:
        json.dump({"command": f"python -m run --alg={alg} --env={env} --seed={seed} --log_path={log}/",
                   "returncode": 0, "wall_s": 100.0, "commit": "abc1234"}, f)


def test_rows_notes_and_commands_from_elsewhere_survive(tmp_path):
    path = _doc(tmp_path)
    section = suite.report("atari-short", [0], str(tmp_path / "empty-root"), path)
    suite.write_markdown(path, "atari-short", section)
    text = Path(path).read_text()
    assert PONG_ROW in text  # not turned into "not run"
    assert "| deepq | PongNoFrameskip-v4 | 1,000,000 | 0 | not run |" in text
    assert "Notes by hand.\n\nMore notes." in text and text.count("Notes by hand.") == 1
    assert PONG_CMD in text
    assert "other section" in text and "\n\n## Suite `classic`" in text


def test_a_finished_run_replaces_the_kept_row(tmp_path):
    path, root = _doc(tmp_path), str(tmp_path / "root")
    _finished_run(root, "ppo2", "PongNoFrameskip-v4", 19.5)
    suite.write_markdown(path, "atari-short", suite.report("atari-short", [0], root, path))
    text = Path(path).read_text()
    assert PONG_ROW not in text
    assert "| ppo2 | PongNoFrameskip-v4 | 2,500,000 | 1 | 19.5 |" in text
    assert "Notes by hand." in text
    assert os.path.exists(tmp_path / "benchmarks" / "atari-short-ppo2-PongNoFrameskip-v4.png")


def test_a_seed_run_here_joins_the_seeds_published_before(tmp_path):
    path, root = _doc(tmp_path), str(tmp_path / "root")
    _finished_run(root, "ppo2", "PongNoFrameskip-v4", 19.5, seed=1)
    suite.write_markdown(path, "atari-short", suite.report("atari-short", [1], root, path))
    row = next(line for line in Path(path).read_text().splitlines() if line.startswith("| ppo2 | PongNoFrameskip-v4"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:7] == ["2", "16.6", "13.7..19.5", "0: 13.7, 1: 19.5"]
    assert cells[7] == "100" and set(cells[10].split(", ")) == {"2560780", "abc1234"}  # wall: the runs here
    suite.write_markdown(path, "atari-short", suite.report("atari-short", [1], root, path))
    assert row in Path(path).read_text()  # a second rewrite changes nothing


def test_seeds_of_another_command_are_not_mixed_into_the_row(tmp_path):
    """A row published with another budget or other flags stays a row of its own beside the new runs' row."""
    path, root = _doc(tmp_path), str(tmp_path / "root")
    Path(path).write_text(Path(path).read_text().replace(PONG_CMD, PONG_CMD + " --num_env=16"))
    _finished_run(root, "ppo2", "PongNoFrameskip-v4", 19.5, seed=1)
    suite.write_markdown(path, "atari-short", suite.report("atari-short", [1], root, path))
    text = Path(path).read_text()
    assert PONG_ROW in text and "| ppo2 | PongNoFrameskip-v4 | 2,500,000 | 1 | 19.5 | 19.5..19.5 | 1: 19.5 |" in text


def test_a_row_run_with_flags_at_the_suites_budget_carries_the_unseen_seeds(tmp_path):
    """The seeds 10-14 runs (the suite's command, no flags) fill the cell of the row that stands for this budget."""
    path, root = _doc(tmp_path), str(tmp_path / "root")
    Path(path).write_text(Path(path).read_text().replace(PONG_CMD, PONG_CMD + " --num_env=16"))
    suite.write_markdown(path, "atari-short", suite.report("atari-short", [10, 11, 12, 13, 14], root, path))
    assert PONG_ROW + " not run |" in Path(path).read_text()
    _finished_run(root, "ppo2", "PongNoFrameskip-v4", 15.0, seed=10)
    suite.write_markdown(path, "atari-short", suite.report("atari-short", [10, 11, 12, 13, 14], root, path))
    rows = [line for line in Path(path).read_text().splitlines() if line.startswith("| ppo2 | PongNoFrameskip-v4")]
    assert rows == [PONG_ROW + " 15.0 (15.0..15.0; 10: 15.0); under rl-baselines3-zoo's 21, which trains 10M steps "
                               "to this row's 2.5M |"]
    suite.write_markdown(path, "atari-short", suite.report("atari-short", [0], str(tmp_path / "elsewhere"), path))
    assert rows[0] in Path(path).read_text()  # a report without those runs keeps the published cell


def test_the_minatar_suite_tabulates_ids_with_a_slash(tmp_path):
    """MinAtar's ids hold a slash: one run folder and one curve file each, rows for ppo2 and deepq per game."""
    root, out = str(tmp_path / "root"), str(tmp_path / "benchmarks.md")
    spec = suite.SUITES["minatar"][0]
    assert (spec.alg, spec.env, spec.steps) == ("ppo2", "MinAtar/Breakout-v1", 1_000_000)
    assert suite.run_dir(root, spec, 0) == os.path.join(root, "ppo2", "MinAtar_Breakout-v1", "seed0")
    _finished_run(root, "ppo2", "MinAtar_Breakout-v1", 12.0)
    suite.write_markdown(out, "minatar", suite.report("minatar", [0], root, out))
    text = Path(out).read_text()
    assert "| ppo2 | MinAtar/Breakout-v1 | 1,000,000 | 1 | 12.0 |" in text
    assert "| deepq | MinAtar/Seaquest-v1 | 1,000,000 | 0 | not run |" in text
    assert os.path.exists(tmp_path / "benchmarks" / "minatar-ppo2-MinAtar_Breakout-v1.png")


def test_a_pettingzoo_ids_curve_file_has_no_colon(tmp_path):
    """PettingZoo's ids are module:env; the curve is a file of the repository, which some systems cannot check out
    with a colon in its name."""
    root, out = str(tmp_path / "root"), str(tmp_path / "benchmarks.md")
    _finished_run(root, "ppo2", "mpe2:simple_spread_v3", -12.0)
    suite.write_markdown(out, "multiagent", suite.report("multiagent", [0], root, out))
    steps = next(s.steps for s in suite.SUITES["multiagent"] if s.env == "mpe2:simple_spread_v3")
    assert f"| ppo2 | mpe2:simple_spread_v3 | {steps:,} | 1 | -12.0 |" in Path(out).read_text()
    assert os.listdir(tmp_path / "benchmarks") == ["multiagent-ppo2-mpe2_simple_spread_v3.png"]


def test_the_minatar_suite_has_ppo2_deepq_rainbow_and_qrdqn_per_game():
    runs = {(spec.alg, spec.env) for spec in suite.SUITES["minatar"]}
    assert runs == {(alg, f"MinAtar/{game}-v1") for alg in ("ppo2", "deepq", "rainbow", "qrdqn")
                    for game in ("Breakout", "SpaceInvaders", "Asterix", "Freeway", "Seaquest")}


def test_an_interrupted_run_resumes_with_the_flags_only_the_command_line_may_give(tmp_path, monkeypatch):
    spec = next(s for s in suite.SUITES["multiagent"] if ":" in s.env)
    folder = suite.run_dir(str(tmp_path), spec, 0)
    os.makedirs(os.path.join(folder, "log", "resume"))
    Path(folder, "log", "resume", "checkpoint").write_text("")
    with open(os.path.join(folder, "run.json"), "w") as f:
        json.dump({"command": "python -m run", "returncode": None, "wall_s": 5.0, "started": 0.0, "commit": "x"}, f)
    called = []
    monkeypatch.setattr(suite.subprocess, "call", lambda cmd, **kw: called.append(cmd) or 0)
    suite.train(spec, 0, str(tmp_path))
    assert called[0][3:] == [f"--resume={os.path.join(folder, 'log')}", f"--env={spec.env}",
                             f"--save_path={os.path.join(folder, 'model.zip')}", "--no_progress"]


def test_a_row_of_another_budget_stays_beside_the_suites_own_row(tmp_path):
    spec = next(s for s in suite.SUITES["classic"] if (s.alg, s.env) == ("ppo2", "Acrobot-v1"))
    old = dataclasses.replace(spec, steps=spec.steps // 5)
    row = (f"| ppo2 | Acrobot-v1 | {old.steps:,} | 1 | -85.0 | -85.0..-85.0 | 0: -85.0 | 209 | 956 | "
           f"{spec.reference} | 4dd8cf1 |")
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## Suite `classic`\n\n" + HEADER + "\n| --- |\n" + row + "\n" + row + "\n\n"
                   + suite.COMMANDS_HEADING + "\n\n    " + suite.generic_command(old) + "\n")
    section = suite.report("classic", [0], str(tmp_path / "runs"), str(doc))
    acrobot = [line for line in section.splitlines() if line.startswith("| ppo2 | Acrobot-v1 |")]
    assert acrobot == [row[:-1] + "| not run |",  # a row published without the unseen-seeds cell gets it
                       f"| ppo2 | Acrobot-v1 | {spec.steps:,} | 0 | not run | | | | | {spec.reference} | | not run |"]
    assert "    " + suite.generic_command(old) in section.splitlines()
    assert "of the reference.\n\n| alg | env |" in section  # the blank line before the table stays


def test_rows_say_which_seeds_are_still_running_or_failed(tmp_path):
    root, spec = str(tmp_path / "runs"), next(s for s in suite.SUITES["classic"] if s.alg == "deepq")
    _finished_run(root, spec.alg, spec.env, -100.0, seed=0)
    _finished_run(root, spec.alg, spec.env, -120.0, seed=1)
    with open(os.path.join(root, spec.alg, spec.env, "seed1", "run.json"), "w") as f:  # stopped, resumes later
        json.dump({"command": "python -m run", "returncode": None, "wall_s": 10.0, "started": 0.0}, f)
    os.makedirs(os.path.join(root, spec.alg, spec.env, "seed2"))
    with open(os.path.join(root, spec.alg, spec.env, "seed2", "run.json"), "w") as f:
        json.dump({"command": "python -m run", "returncode": 2, "wall_s": 1.0}, f)
    _finished_run(root, spec.alg, spec.env, -130.0, seed=3)
    with open(os.path.join(root, spec.alg, spec.env, "seed3", "run.json"), "w") as f:  # stopped by SIGTERM
        json.dump({"command": "python -m run", "returncode": 143, "wall_s": 10.0}, f)
    section = suite.report("classic", [0, 1, 2, 3], root, str(tmp_path / "benchmarks.md"))
    row = next(line for line in section.splitlines() if line.startswith(f"| {spec.alg} | {spec.env} |"))
    assert "| 1 | -100.0 |" in row
    assert "0: -100.0, 1: running (-120.0 at 2k steps), 2: failed (exit 2), 3: stopped (-130.0 at 2k steps)" in row
    doc = tmp_path / "benchmarks.md"
    suite.write_markdown(str(doc), "classic", section)
    _finished_run(root, "ppo2", "CartPole-v1", 500.0, seed=3)  # a later rewrite reads the running row back
    assert suite._existing_section(str(doc), "classic").rows.get((spec.alg, spec.env)) == [row]
    assert suite._row_seeds(row) == {0: -100.0}


def test_unseen_seeds_fill_their_own_column_and_stay_out_of_the_median(tmp_path):
    path, root = _doc(tmp_path), str(tmp_path / "root")
    for seed, final in ((10, 15.0), (11, 17.0), (12, 16.0)):
        _finished_run(root, "ppo2", "PongNoFrameskip-v4", final, seed=seed)
    suite.write_markdown(path, "atari-short", suite.report("atari-short", [10, 11, 12, 13, 14], root, path))
    text = Path(path).read_text()
    unseen = "16.0 (15.0..17.0; 10: 15.0, 11: 17.0, 12: 16.0); under rl-baselines3-zoo's 21, which trains 10M steps to this row's 2.5M"
    assert PONG_ROW + f" {unseen} |" in text  # the row's seed 0 kept as is
    assert suite.UNSEEN_HEADING in text
    # a later report of the row's own seeds keeps the unseen cell as published
    _finished_run(root, "ppo2", "PongNoFrameskip-v4", 19.5, seed=0)
    suite.write_markdown(path, "atari-short", suite.report("atari-short", [0], str(tmp_path / "root"), path))
    text = Path(path).read_text()
    assert "| ppo2 | PongNoFrameskip-v4 | 2,500,000 | 1 | 19.5 |" in text
    assert f"| {unseen} |" in text and text.count("; under ") == 1
    assert "| deepq | PongNoFrameskip-v4 | 1,000,000 | 0 | not run |" in text


def test_an_unseen_median_under_the_zoos_figure_says_so():
    spec = suite.Spec("sac", "Pendulum-v1", 20_000, "-157 (rl-baselines3-zoo SAC, 0.02M); mark -365.0 (random -1197.2)")
    assert suite.zoo_figure(spec.reference) == -157.0
    assert suite.zoo_figure("none on MuJoCo; 1157.1 (rl-baselines3-zoo DDPG on PyBullet's HopperBulletEnv-v0, 1M)") is None
    assert suite.zoo_figure("2500 (this project's target); 3606 (rl-baselines3-zoo TD3, v3, 1M)") == 3606.0
    under = "-158.8 (-198.8..-122.1; 10: -156.9, 11: -122.1, 12: -198.8, 13: -158.8, 14: -158.9)"
    assert suite._said_when_under(under, spec) == under + "; under rl-baselines3-zoo's -157"
    above = "-150.0 (-160.0..-140.0; 10: -150.0)"
    assert suite._said_when_under(above, spec) == above
    assert suite._said_when_under("not run", spec) == "not run"
    assert suite._said_when_under(suite._said_when_under(under, spec), spec).count("; under ") == 1


def test_an_unseen_median_under_a_zoo_figure_of_a_longer_run_names_both_budgets():
    spec = suite.Spec("sac", "HalfCheetah-v5", 300_000, "6000 (this project's target); 9535 (rl-baselines3-zoo SAC, v3, 1M)")
    assert suite.zoo_budget(spec.reference) == 1_000_000
    assert suite.zoo_budget("-157 (rl-baselines3-zoo TQC (SAC's), 0.02M); mark -365.0") == 20_000
    assert suite.zoo_budget("5819 (rl-baselines3-zoo PPO)") is None
    assert suite.zoo_budget("21.0 (rl-baselines3-zoo PPO, 10M steps = 40M frames)") == 10_000_000
    cell = "6597.6 (5833.7..7361.4; 10: 7361.4, 13: 5833.7)"
    said = cell + "; under rl-baselines3-zoo's 9535, which trains 1M steps to this row's 300k"
    assert suite._said_when_under(cell, spec) == said


def test_the_robotics_suite_reports_success_rates_with_two_decimals(tmp_path):
    root = str(tmp_path / "root")
    for seed, rate in ((0, 0.93), (1, 0.88), (2, 0.97)):
        log = os.path.join(root, "her", "FetchPush-v4", f"seed{seed}", "log")
        os.makedirs(log)
        with open(os.path.join(log, "evaluations.csv"), "w") as f:
            f.write("timesteps,return_mean,return_std,length_mean,episodes,seconds,success_rate\n"
                    f"500000,-30,1,50,100,1,0.41\n1000000,-9,1,50,100,1,{rate}\n")
        with open(os.path.join(root, "her", "FetchPush-v4", f"seed{seed}", "run.json"), "w") as f:
            json.dump({"command": f"python -m run --alg=her --env=FetchPush-v4 --seed={seed} --log_path={log}/",
                       "returncode": 0, "wall_s": 100.0, "commit": "abc1234"}, f)
    section = suite.report("robotics", [0, 1, 2], root, str(tmp_path / "benchmarks.md"))
    row = next(line for line in section.splitlines() if line.startswith("| her | FetchPush-v4 |"))
    assert "| 3 | 0.93 | 0.88..0.97 | 0: 0.93, 1: 0.88, 2: 0.97 |" in row
    assert "evaluation over 100 episodes: the success rate" in section
    assert (tmp_path / "benchmarks" / "robotics-her-FetchPush-v4.png").exists()


def test_a_specs_flag_replaces_the_suites_default_of_that_name():
    """The robotics specs evaluate over 100 episodes: their command says so once, without the default 10."""
    spec = next(s for s in suite.SUITES["robotics"] if s.env == "FetchPush-v4")
    cmd = suite.generic_command(spec)
    assert cmd.count("--eval_episodes=") == 1 and "--eval_episodes=100" in cmd and "--eval_freq=50000" in cmd
    assert "--eval_episodes=10 " in suite.generic_command(suite.SUITES["mujoco"][0])


def test_a_run_from_uncommitted_changes_says_so_in_its_commit(tmp_path):
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    git("init", "-q")
    (tmp_path / "entry.toml").write_text("a = 1\n")
    git("add", "entry.toml")
    git("commit", "-qm", "entry")
    clean = suite._commit(str(tmp_path))
    (tmp_path / "entry.toml").write_text("a = 2\n")
    assert re.fullmatch(r"[0-9a-f]{7,}", clean)
    assert suite._commit(str(tmp_path)) == clean + "+changes"
    assert suite._commit(str(tmp_path / "not-a-repo")) == "unknown"


KEPT = os.path.join(suite.ROOT, "bench", "results", "unseen")


def test_every_kept_record_belongs_to_a_row_of_a_suite():
    specs = {(spec.alg, suite.file_name(spec.env)) for specs in suite.SUITES.values() for spec in specs}
    kept = [tuple(p.relative_to(KEPT).parts[:2]) for p in Path(KEPT).glob("*/*/seed*/run.json")]
    assert set(kept) <= specs


def test_published_unseen_cells_are_what_the_kept_records_give():
    """A row whose five seeds 10-14 runs are kept in bench/results/unseen shows the cell those records give."""
    doc = os.path.join(suite.ROOT, "docs", "benchmarks.md")
    for name, specs in suite.SUITES.items():
        rows = suite._existing_section(doc, name).rows
        for spec in specs:
            if not all(os.path.exists(os.path.join(suite.run_dir(KEPT, spec, seed), "run.json"))
                       for seed in suite.UNSEEN_SEEDS):
                continue
            published = [suite._cells(row)[suite.ROW_CELLS] for row in rows.get((spec.alg, spec.env), [])
                         if suite._cells(row)[2] == f"{spec.steps:,}"]
            assert suite._unseen_cell(spec, KEPT, None, []) in published, (spec.alg, spec.env)

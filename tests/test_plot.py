"""Learning-curve loading, grouping and the plot command, on the fixture log folders."""

import json
import os
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

import plot
from common.logs import curves, plot_util
from common.logs.curves import NoDataError

LOGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "logs")
SEED0 = os.path.join(LOGS, "ppo2-cartpole-seed0")
SEED1 = os.path.join(LOGS, "ppo2-cartpole-seed1")
DEEPQ = os.path.join(LOGS, "deepq-cartpole")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_monitor_files_merge_by_end_time_and_count_all_env_steps():
    run = curves.load_run(SEED0)
    assert run.source == "monitor"
    # the two env files interleave in time: lengths (= returns) 10, 11, ..., 49
    np.testing.assert_array_equal(run.returns, np.arange(10, 50))
    np.testing.assert_array_equal(run.timesteps, np.cumsum(np.arange(10, 50)))
    assert run.timesteps[-1] == 1180


def test_row_cut_short_and_empty_new_file_are_skipped(tmp_path):
    run = curves.load_run(SEED1)
    assert len(run.returns) == 40  # the trailing "33.0,3" row has no time column
    np.testing.assert_array_equal(run.returns, np.arange(20, 60))
    shutil.copytree(SEED1, tmp_path / "run")
    (tmp_path / "run" / "1.0.monitor.csv").write_text("")  # a rank that has not written its header yet
    np.testing.assert_array_equal(curves.load_run(str(tmp_path / "run")).returns, np.arange(20, 60))


def test_progress_csv_fallback_skips_blank_cells():
    run = curves.load_run(DEEPQ)
    assert run.source == "progress"
    np.testing.assert_array_equal(run.timesteps, [100, 300, 400])
    np.testing.assert_array_equal(run.returns, [9.0, 15.5, 30.0])
    forced = curves.load_run(SEED0, source="progress")
    np.testing.assert_array_equal(forced.timesteps, [256, 512, 768, 1024])


def test_folder_without_data_raises_one_clear_error(tmp_path):
    with pytest.raises(NoDataError, match="no \\*.monitor.csv files .*; no progress.csv"):
        curves.load_run(str(tmp_path))
    (tmp_path / "0.0.monitor.csv").write_text('#{"t_start": 1.0}\nr,l,t\n')
    assert plot_util.write_final_curve(str(tmp_path)) is None  # no finished episode yet
    with pytest.raises(ValueError, match="unknown source"):
        curves.load_run(SEED0, source="tensorboard")


def test_smooth_is_a_centred_moving_average():
    y = np.array([0, 0, 6, 0, 0, 0, 0, 0, 0, 0], dtype=float)
    np.testing.assert_allclose(smooth := curves.smooth(y, 1), [0, 2, 2, 2, 0, 0, 0, 0, 0, 0])
    assert smooth.sum() == pytest.approx(y.sum())
    np.testing.assert_allclose(curves.smooth(y, 0), y)
    np.testing.assert_allclose(curves.smooth([1.0, 2.0, 4.0], 10), [1, 2, 4])  # capped radius


@pytest.mark.parametrize(
    ("path", "group_by", "key"),
    [
        ("logs/ppo2-cartpole-seed3", "auto", "ppo2-cartpole"),
        ("logs/a2c_1", "auto", "a2c"),
        ("logs/ppo/seed0", "auto", "ppo"),
        ("logs/ppo/seed0", "parent", "ppo"),
        ("logs/ppo/seed0", "run", "seed0"),
        ("logs/exp-lr1e-3-seed0", r"lr[0-9e.-]+?(?=-seed)", "lr1e-3"),
        ("logs/other", r"lr([0-9e.-]+)", "other"),
    ],
)
def test_group_keys(path, group_by, key):
    run = curves.Run(path, np.zeros(1), np.zeros(1), "monitor")
    assert curves.group_key(run, group_by) == key


def test_group_mean_and_std_on_the_common_grid():
    runs = curves.find_runs([LOGS])
    assert [r.name for r in runs] == ["deepq-cartpole", "ppo2-cartpole-seed0", "ppo2-cartpole-seed1"]
    groups = curves.group_runs(runs)
    assert {k: len(v) for k, v in groups.items()} == {"deepq-cartpole": 1, "ppo2-cartpole": 2}
    curve = curves.aggregate("ppo2", groups["ppo2-cartpole"], smooth_radius=0, spread="std")
    assert curve.x[0] == 20 and curve.x[-1] == 1180  # the range both runs cover
    a = np.interp(curve.x, runs[1].timesteps, runs[1].returns)
    b = np.interp(curve.x, runs[2].timesteps, runs[2].returns)
    np.testing.assert_allclose(curve.mean, (a + b) / 2)
    np.testing.assert_allclose(curve.high - curve.mean, np.abs(a - b) / 2)
    minmax = curves.aggregate("ppo2", groups["ppo2-cartpole"], smooth_radius=0, spread="minmax")
    np.testing.assert_allclose(minmax.low, np.minimum(a, b))


def test_plot_command_writes_png_of_requested_size(tmp_path, capsys):
    out = tmp_path / "sub" / "curves.png"
    rc = plot.main([LOGS, "--out", str(out), "--width", "640", "--height", "480", "--spread", "minmax"])
    assert rc == 0
    assert plot_util.png_size(str(out)) == (640, 480)
    import matplotlib.image

    pixels = matplotlib.image.imread(str(out))
    assert pixels.shape[:2] == (480, 640)
    assert (pixels[..., :3] < 0.9).any(axis=-1).mean() > 0.01  # something was drawn
    assert "ppo2-cartpole: 2 run(s), 1180 timesteps" in capsys.readouterr().out
    assert not [p for p in os.listdir(out.parent) if p.endswith(".tmp")]


def test_plot_command_user_errors_exit_2(tmp_path, capsys):
    assert plot.main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.strip().startswith("plot: error: log folder")
    assert plot.main([LOGS, "--out", str(tmp_path / "x.png"), "--group", "("]) == 2
    assert "not a valid regular expression" in capsys.readouterr().err


def test_write_final_curve(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(SEED0, run_dir)
    path = plot_util.write_final_curve(str(run_dir), width=400, height=300)
    assert path == str(run_dir / "learning_curve.png")
    assert plot_util.png_size(path) == (400, 300)


def test_python_dash_m_plot(tmp_path):
    out = tmp_path / "c.png"
    proc = subprocess.run(
        [sys.executable, "-m", "plot", DEEPQ, "--out", str(out)],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert plot_util.png_size(str(out)) == (800, 500)


def test_importing_plot_util_does_not_import_matplotlib():
    code = "import sys, common.logs.plot_util; print('matplotlib' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], check=False, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False", proc.stderr


def test_a_group_of_one_run_keeps_the_run_name(tmp_path):
    drawn = plot_util.plot_curves([curves.load_run(SEED1)], str(tmp_path / "one.png"), smooth_radius=0)
    assert [(c.label, c.n_runs) for c in drawn] == [("ppo2-cartpole-seed1", 1)]
    np.testing.assert_array_equal(drawn[0].mean, np.arange(20, 60))  # raw points, no band


def test_run_writes_the_final_curve_into_the_log_folder(tmp_path):
    import run

    log = tmp_path / "log"
    run.main(["--alg=tests.fake_alg:learn", "--env=CartPole-v1", "--num_env=2", "--num_timesteps=2000",
              f"--log_path={log}", "--no_progress"])
    assert (log / "learning_curve.png").is_file()
    assert plot_util.png_size(str(log / "learning_curve.png")) == (800, 500)


@pytest.fixture
def drawn_figures(monkeypatch):
    """The figures plot_util draws, kept instead of written."""
    figures = []
    monkeypatch.setattr(plot_util, "_save_png", lambda fig, out_path, dpi: figures.append(fig))
    return figures


def runs_with_config(tmp_path, layout):
    """Copies of fixture runs with a config.json each: {folder name: (fixture, alg, env id)}."""
    for name, (source, alg, env) in layout.items():
        shutil.copytree(source, tmp_path / name)
        (tmp_path / name / "config.json").write_text(json.dumps({"alg": alg, "env_id": env, "seed": 0}))
    return curves.find_runs([str(tmp_path)])


def legend_texts(fig):
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def test_final_curve_is_titled_with_algorithm_and_env_and_says_its_units(tmp_path, drawn_figures):
    (run,) = runs_with_config(tmp_path, {"run": (SEED0, "ppo2", "CartPole-v1")})
    plot_util.write_final_curve(run.path)
    (ax,) = drawn_figures[0].axes
    assert ax.get_title() == "ppo2 on CartPole-v1 (run)"
    assert ax.get_xlabel() == "environment steps (all envs)"
    assert ax.get_ylabel() == "episode return, moving average of 21 episodes"


@pytest.mark.parametrize(("spread", "words"), [("std", "mean ± 1 std"), ("ci95", "95% CI of the mean"),
                                               ("minmax", "min to max")])
def test_the_band_is_labelled(tmp_path, drawn_figures, spread, words):
    runs = runs_with_config(tmp_path, {"ppo2-seed0": (SEED0, "ppo2", "CartPole-v1"),
                                       "ppo2-seed1": (SEED1, "ppo2", "CartPole-v1")})
    plot_util.plot_curves(runs, str(tmp_path / "c.png"), spread=spread)
    assert drawn_figures[0].axes[0].get_title() == "ppo2 on CartPole-v1"
    assert legend_texts(drawn_figures[0]) == ["ppo2 (2 runs)", f"shaded: {words} over runs"]


def test_ci95_is_the_normal_interval_of_the_mean():
    runs = [curves.load_run(SEED0), curves.load_run(SEED1)]
    std = curves.aggregate("ppo2", runs, smooth_radius=0, spread="std")
    ci = curves.aggregate("ppo2", runs, smooth_radius=0, spread="ci95")
    # two runs: the sample std (ddof=1) is sqrt(2) x the population std, and the mean's standard error 1/sqrt(2) of it
    np.testing.assert_allclose(ci.high - ci.mean, 1.96 * (std.high - std.mean))


def test_many_runs_put_the_legend_beside_the_axes_and_ticks_are_whole_steps(tmp_path, drawn_figures):
    short = curves.Run(str(tmp_path / "short"), np.array([1, 2, 3, 4, 5, 6, 7]), np.arange(7.0), "monitor")
    runs = [short] + [curves.Run(str(tmp_path / f"run{i}"), short.timesteps, short.returns + i, "monitor")
                      for i in range(11)]
    plot_util.plot_curves(runs, str(tmp_path / "c.png"), group_by="run", smooth_radius=0)
    fig = drawn_figures[0]
    assert fig.axes[0].get_legend() is None and len(legend_texts(fig)) == 12  # in fig.legends, outside
    fig.canvas.draw()
    ticks = [t for t in fig.axes[0].get_xticks() if 1 <= t <= 7]
    assert ticks and all(float(t).is_integer() for t in ticks)


def test_grid_compares_algorithms_per_env(tmp_path, capsys):
    runs_with_config(tmp_path / "logs", {
        "ppo2-cartpole-seed0": (SEED0, "ppo2", "CartPole-v1"), "ppo2-cartpole-seed1": (SEED1, "ppo2", "CartPole-v1"),
        "deepq-cartpole": (DEEPQ, "deepq", "CartPole-v1"), "ppo2-acrobot-seed0": (SEED1, "ppo2", "Acrobot-v1")})
    out = tmp_path / "grid.png"
    assert plot.main([str(tmp_path / "logs"), "--grid", "env", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sorted(line.split(" run(s)")[0] for line in lines[:3]) == [
        "Acrobot-v1: ppo2: 1", "CartPole-v1: deepq: 1", "CartPole-v1: ppo2: 2"]
    assert plot_util.png_size(str(out)) == (1200, 800)


def test_grid_keeps_an_algorithm_colour_in_every_panel(tmp_path, drawn_figures):
    runs = runs_with_config(tmp_path, {"a": (SEED0, "ppo2", "CartPole-v1"), "b": (DEEPQ, "deepq", "CartPole-v1"),
                                       "c": (SEED1, "ppo2", "Acrobot-v1")})
    drawn = plot_util.plot_grid(runs, str(tmp_path / "g.png"))
    assert {panel: [c.label for c in cs] for panel, cs in drawn.items()} == {
        "CartPole-v1": ["ppo2", "deepq"], "Acrobot-v1": ["ppo2"]}
    fig = drawn_figures[0]
    color = {ax.get_title(): {line.get_label(): line.get_color() for line in ax.get_lines()}
             for ax in fig.axes if ax.get_visible()}
    assert color["CartPole-v1"]["ppo2"] == color["Acrobot-v1"]["ppo2"] != color["CartPole-v1"]["deepq"]
    assert fig.get_suptitle() == "learning curves: 2 algorithms on 2 envs"


def test_tune_history_counts_trials_in_whole_numbers(monkeypatch, tmp_path):
    import matplotlib.pyplot as plt

    import tune

    closed = []
    monkeypatch.setattr(plt, "close", closed.append)
    trials = [types.SimpleNamespace(number=n, value=v) for n, v in enumerate([10.0, 30.0, 20.0])]
    tune._plot_history(trials, "s", str(tmp_path / "h.png"))
    (ax,) = closed[0].axes
    closed[0].canvas.draw()
    assert [t for t in ax.get_xticks() if 0 <= t <= 2] == [0, 1, 2]

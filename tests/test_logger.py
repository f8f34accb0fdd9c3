"""common.logs.logger outputs and common.logs.progress."""

from __future__ import annotations

import io
import json

import pytest

from common.logs import logger, progress


def test_all_file_outputs(tmp_path) -> None:
    logger.configure(str(tmp_path), format_strs=["log", "csv", "json"])
    assert logger.get_dir() == str(tmp_path)
    logger.logkv("a", 1)
    logger.logkv_mean("m", 1.0)
    logger.logkv_mean("m", 3.0)
    assert logger.dumpkvs() == {"a": 1, "m": 2.0}
    logger.logkv("a", 2)
    logger.logkv("b", "x")  # a new key widens the CSV
    logger.dumpkvs()
    logger.log("hello", 3)
    logger.reset()
    assert (tmp_path / "progress.csv").read_text().splitlines() == ["a,m,b", "1,2.0,", "2,,x"]
    rows = [json.loads(line) for line in (tmp_path / "progress.json").read_text().splitlines()]
    assert rows == [{"a": 1, "m": 2.0}, {"a": 2, "b": "x"}]
    text = (tmp_path / "log.txt").read_text()
    assert "| m | 2        |" in text and "hello 3" in text and f"Logging to {tmp_path}" in text


def test_stdout_table(tmp_path, capsys) -> None:
    logger.configure(str(tmp_path), format_strs=["stdout"])
    logger.logkv("loss", 0.123456)
    logger.logkv("long_name", 10)
    logger.dumpkvs()
    out = capsys.readouterr().out
    assert "| loss      | 0.123    |" in out
    assert "| long_name | 10       |" in out


def test_numpy_scalars_are_plain_in_json(tmp_path) -> None:
    import numpy as np

    logger.configure(str(tmp_path), format_strs=["json"])
    logger.logkv("x", np.float32(0.5))
    logger.logkv("n", np.int64(3))
    logger.dumpkvs()
    logger.reset()
    assert json.loads((tmp_path / "progress.json").read_text()) == {"x": 0.5, "n": 3}


def test_unknown_format_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown log format 'xml'; known: stdout, log, csv, json, tensorboard"):
        logger.configure(str(tmp_path), format_strs=["xml"])


def test_scoped_configure_restores(tmp_path) -> None:
    outer = logger.configure(str(tmp_path / "outer"), format_strs=[])
    with logger.scoped_configure(str(tmp_path / "inner"), format_strs=["csv"]) as inner:
        assert logger.get_current() is inner and logger.get_dir() == str(tmp_path / "inner")
    assert logger.get_current() is outer


def test_default_dir_is_fresh_temp_folder() -> None:
    a, b = logger.default_log_dir(), logger.default_log_dir()
    assert "runner-" in a and a != b


def test_progress_bar_draws_throttled_and_reads_logger_dumps(tmp_path) -> None:
    stream = io.StringIO()
    bar = progress.ProgressBar(1000, enabled=True, stream=stream, min_interval=3600)
    progress.set_progress(bar)
    logger.configure(str(tmp_path), format_strs=[])
    logger.logkv("time/total_timesteps", 100)
    logger.logkv("rollout/ep_rew_mean", 12.5)
    logger.dumpkvs()  # first draw
    progress.get_progress().update(200)  # throttled: no draw
    assert stream.getvalue().count("\r") == 1
    assert "100/1000  10%" in stream.getvalue() and "return 12.5" in stream.getvalue()
    bar.update(1000)  # the end is always drawn
    bar.close()
    assert stream.getvalue().endswith("\n") and "1000/1000 100%" in stream.getvalue()


def test_progress_bar_asks_for_a_mean_return_function_only_when_it_draws() -> None:
    stream, calls = io.StringIO(), []

    def mean_return() -> float:
        calls.append(1)
        return 7.25

    bar = progress.ProgressBar(1000, enabled=True, stream=stream, min_interval=3600)
    bar.update(100, mean_return)  # first draw
    for t in range(200, 900, 100):
        bar.update(t, mean_return)  # throttled
    assert len(calls) == 1 and "return 7.25" in stream.getvalue()
    bar.update(1000, mean_return)  # the end is always drawn
    assert len(calls) == 2


def test_progress_off_when_not_a_terminal_and_noop_without_bar() -> None:
    stream = io.StringIO()
    bar = progress.ProgressBar(10, stream=stream)
    bar.update(5)
    bar.close()
    assert not bar.enabled and stream.getvalue() == ""
    progress.get_progress().update(3)  # no active bar: a no-op object
    assert isinstance(progress.get_progress(), progress.NullProgress)


def test_stdout_output_follows_a_replaced_sys_stdout(monkeypatch) -> None:
    """The stdout table goes to the sys.stdout of the moment, not to one closed since (pytest, notebooks)."""
    import sys

    logger.reset()
    first = io.StringIO()
    monkeypatch.setattr(sys, "stdout", first)
    logger.configure(None, format_strs=["stdout"])
    first.close()
    second = io.StringIO()
    monkeypatch.setattr(sys, "stdout", second)
    logger.logkv("answer", 42)
    logger.dumpkvs()
    assert "| answer | 42" in second.getvalue()
    logger.reset()


def test_tensorboard_scalars_arrive_in_event_files(tmp_path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util.tensor_util import make_ndarray

    logger.configure(str(tmp_path), format_strs=["tensorboard"])
    for step in (10, 20):
        logger.logkv("time/total_timesteps", step)
        logger.logkv("rollout/ep_rew_mean", step / 2)
        logger.dumpkvs()
    logger.reset()
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    events = acc.Tensors("rollout/ep_rew_mean")  # TF2 writes scalars as tensor summaries
    assert [(e.step, float(make_ndarray(e.tensor_proto))) for e in events] == [(10, 5.0), (20, 10.0)]

"""Files that are not regular files (FIFOs, devices, folders) where the commands expect one, outputs that
are the input or not regular files, and unreadable text: each one line, nothing read, waited on or replaced."""
from __future__ import annotations

import os
import stat

import pytest

import export
import plot
import run
from common.errors import UserError
from run_util import MAX_TEXT_FILE_BYTES, UsageError
from runner.config import user_file_entries

LOGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "logs")


@pytest.fixture(params=["fifo", "zero", "folder"])
def special(request, tmp_path) -> tuple[str, str]:
    """A path of something that is not a regular file, and the words that name it."""
    if request.param == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
        return path, "is a FIFO (named pipe), not a regular file"
    if request.param == "zero":
        return "/dev/zero", "is a character device, not a regular file"
    return str(tmp_path), "is a folder, not a regular file"


def _one_line(error: pytest.ExceptionInfo, words: str) -> None:
    assert words in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.timeout(30)  # a FIFO was waited on, /dev/zero read to the end of memory
def test_special_hyperparams_file_is_refused_unread(special) -> None:
    path, words = special
    with pytest.raises(UsageError) as e:
        user_file_entries(path, "classic_control", "CartPole-v1")
    _one_line(e, f"--hyperparams {path} {words}")


def test_hyperparams_file_that_is_not_utf8_or_too_large_is_one_line(tmp_path) -> None:
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes('# réglages\nlr = 0.001\n'.encode("latin-1"))
    with pytest.raises(UsageError) as e:
        user_file_entries(str(latin1), "classic_control", "CartPole-v1")
    _one_line(e, f"--hyperparams {latin1}: not UTF-8 text (byte 3)")
    large = tmp_path / "large.toml"
    large.write_text("# " + "x" * MAX_TEXT_FILE_BYTES + "\n")
    with pytest.raises(UsageError) as e:
        user_file_entries(str(large), "classic_control", "CartPole-v1")
    _one_line(e, f"--hyperparams {large} is larger than {MAX_TEXT_FILE_BYTES} bytes")


@pytest.mark.timeout(30)
def test_special_config_json_of_resume_is_refused_unread(special, tmp_path) -> None:
    path, words = special
    folder = tmp_path / "log"
    folder.mkdir()
    os.symlink(path, folder / "config.json")
    with pytest.raises(UsageError) as e:
        run.parse_args([f"--resume={folder}"])
    _one_line(e, f"--resume {folder / 'config.json'} {words}")


@pytest.mark.timeout(30)
def test_special_load_path_says_what_it_is(special) -> None:
    path, words = special
    with pytest.raises(UsageError) as e:
        run.parse_args(["--env=CartPole-v1", "--num_timesteps=0", f"--load_path={path}"])
    _one_line(e, f"--load_path {path} {words}")


def test_plot_out_never_replaces_a_fifo_or_a_link(tmp_path, capsys) -> None:
    fifo, target = tmp_path / "fifo.png", tmp_path / "target.png"
    os.mkfifo(fifo)
    target.write_bytes(b"mine")
    # links only, not /dev/full itself: code without the check would replace the device node (as root)
    links = {tmp_path / "full.png": "/dev/full", tmp_path / "link.png": target}
    for link, to in links.items():
        os.symlink(to, link)
    for out, words in ((fifo, "a FIFO (named pipe)"), *((link, "a symbolic link") for link in links)):
        assert plot.main([LOGS, f"--out={out}"]) == 2
        assert capsys.readouterr().err.strip() == f"plot: error: --out {out} is {words}, not a regular file; " \
                                                  "give another name"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and target.read_bytes() == b"mine"
    assert all(os.readlink(link) == str(to) for link, to in links.items())


def test_export_out_that_is_the_model_file_is_refused(tmp_path) -> None:
    model = tmp_path / "model.zip"
    model.write_bytes(b"a model")
    os.link(model, tmp_path / "hard.onnx")
    for out in (model, tmp_path / "hard.onnx"):
        with pytest.raises(UserError) as e:
            export.parse_args([str(model), "--format=onnx", f"--out={out}"])
        _one_line(e, f"--out {out} is the model file itself; give another name")
    assert model.read_bytes() == b"a model"

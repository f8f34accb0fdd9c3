"""The saves of a run: the model goes to ``--save_path``, or, when that cannot be written (a full disk, a
name too long, a folder gone), to a fallback file in the log folder or the temp folder, and the command
says where. Used at the end of training, after Ctrl-C/SIGTERM and after an env failure."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from common.errors import UserError


class SaveError(UserError):
    """The model could not be written to ``--save_path``; the message says why and where it went instead."""


def fallback_paths(save_path: str, log_dir: str | None) -> list[str]:
    """Where the model goes when ``save_path`` fails: ``<log dir>/<name>`` (``model.zip`` when the name is
    too long), then ``<temp folder>/<stem>-<pid>.zip``; a name already taken in the log folder also gets
    this process id."""
    name = os.path.basename(save_path)
    if len(os.fsencode(name)) > 100 or not name:
        name = "model.zip"
    folders = [f for f in (log_dir, tempfile.gettempdir()) if f]
    paths = []
    stem, ext = os.path.splitext(name)
    for folder in dict.fromkeys(os.path.abspath(f) for f in folders):
        path = os.path.join(folder, name)
        if os.path.lexists(path) or path == os.path.abspath(save_path) or folder != os.path.abspath(folders[0]):
            path = os.path.join(folder, f"{stem}-{os.getpid()}{ext or '.zip'}")
        paths.append(path)
    return paths


def save_model(model: Any, save_path: str, log_dir: str | None) -> tuple[str, str | None]:
    """Save ``model`` to ``save_path``, else to the first fallback that works.

    Returns:
        (the path written, None) or (the fallback written, why ``save_path`` failed).

    Raises:
        SaveError: no place could be written; the message gives each reason.
    """
    try:
        model.save(save_path)
        return save_path, None
    except OSError as e:
        reason = _reason(e)
    failures = [f"{save_path}: {reason}"]
    for path in fallback_paths(save_path, log_dir):
        try:
            model.save(path)
            return path, reason
        except OSError as e:
            failures.append(f"{path}: {_reason(e)}")
    raise SaveError("model not saved anywhere (" + "; ".join(failures) + ")")


def saved_words(save_path: str, written: str, reason: str | None) -> str:
    """'model saved to X', or 'cannot write --save_path X (why); model saved to Y instead'."""
    if reason is None:
        return f"model saved to {written}"
    return f"cannot write --save_path {save_path} ({reason}); model saved to {written} instead"


def save_and_tell(model: Any, save_path: str, log_dir: str | None) -> str:
    """``save_model`` for a run that is ending anyway (interrupted, env failed): the words saying where the
    model went, or why it went nowhere."""
    try:
        return saved_words(save_path, *save_model(model, save_path, log_dir))
    except SaveError as e:
        return str(e)


def _reason(error: OSError) -> str:
    return error.strerror or str(error)

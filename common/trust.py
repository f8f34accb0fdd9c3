"""Who chooses code: the command line (or a Python caller), never a file.

Model files, checkpoints, ``--hyperparams`` files and a log folder's config.json hold values. A value
that would import a module (an env ``module:EnvId``, ``--alg=module:function``, a network
``module:builder``), build a wrapper, or name a file to write is taken from a file only when the
command line gives the same value; otherwise ``TrustError`` says which flag to pass. See docs/trust.md.
"""
from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from common.errors import UserError

CODE_FLAGS = ("env", "alg", "network", "wrapper")  # a value of these may import a module or build a class
OUTPUT_FLAGS = ("save_path", "play_video")  # a value of these is a path the run writes
COMMAND_LINE_FLAGS = CODE_FLAGS + OUTPUT_FLAGS


class TrustError(UserError):
    """A file names code or an output path that only the command line may choose; the message names the
    flag to pass."""


def names_module(value: Any) -> bool:
    """Whether ``value`` (an env id, algorithm or network name) has a ``module:`` part that importing it
    would run; a value that is not a string is code too (a callable or something else no file may set)."""
    return not isinstance(value, str) or ":" in value


def command_line_only(flag: str, value: Any) -> bool:
    """Whether the runner flag ``--flag`` with ``value`` chooses code or an output path, so that a file may
    set it only when the command line gives the same value."""
    if value is None or value == [] or flag not in COMMAND_LINE_FLAGS:
        return False
    return flag in ("wrapper", *OUTPUT_FLAGS) or names_module(value)


def flag_text(flag: str, value: Any) -> str:
    """``--flag=value`` as typed in a shell (one ``--flag=item`` per item of a list)."""
    items = value if isinstance(value, list) else [value]
    return " ".join(_quoted(f"--{flag}={item if isinstance(item, str) else repr(item)}") for item in items)


def _quoted(token: str) -> str:
    """``token`` quoted for a shell: as is when it needs no quotes, in double quotes when that is enough
    (a dict literal's single quotes stay readable), else in single quotes."""
    if shlex.quote(token) == token:
        return token
    return f'"{token}"' if not set(token) & set('"$`\\!') else shlex.quote(token)


def require_on_command_line(flag: str, value: Any, given: Any, source: str, extra: Sequence[str] = ()) -> None:
    """Accept ``value`` of ``--flag`` read from a file (``source`` says where: "model.zip was trained with")
    only when the command line gave the same (``given``; None when not given); else ``TrustError`` naming
    what to pass (with the ``extra`` flags that go with it)."""
    if given == value:
        return
    if given is not None:
        raise TrustError(f"{source} {flag_text(flag, value)}; {flag_text(flag, given)} disagrees with it")
    raise _missing_error({flag: value}, source, extra)


def require_all_on_command_line(values: dict[str, Any], given: dict[str, Any], source: str) -> None:
    """``require_on_command_line`` for several flags read from one file (``values``: flag to value; ``given``:
    the command line's flags): a disagreement is an error of its own; the flags not given are named together
    in one error, so that one corrected command line runs."""
    missing = {}
    for flag, value in values.items():
        if given.get(flag) is None:
            missing[flag] = value
        else:
            require_on_command_line(flag, value, given[flag], source)
    if missing:
        raise _missing_error(missing, source)


def _missing_error(missing: dict[str, Any], source: str, extra: Sequence[str] = ()) -> TrustError:
    """The error for ``missing`` flags (flag to the file's value) that the command line must pass."""
    shown = " ".join(flag_text(flag, value) for flag, value in missing.items())
    purposes = list(dict.fromkeys(_purpose(flag, value) for flag, value in missing.items()))
    return TrustError(f"{source} {shown}; pass {' '.join([shown, *extra])} to {' and '.join(purposes)} "
                      "(a file does not choose code or output paths: docs/trust.md)")


def _purpose(flag: str, value: Any) -> str:
    """What passing ``--flag=value`` on the command line allows, in a few words."""
    if flag in OUTPUT_FLAGS:
        return "write there"
    if flag == "wrapper":
        return "build " + ("them" if isinstance(value, list) and len(value) > 1 else "it")
    return f"import {value.split(':', 1)[0]}" if isinstance(value, str) else "use it"

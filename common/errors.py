"""Exception classes for mistakes a user can make, shared by every layer.

The command line shows any ``UserError`` as one line (``run: error: ...``) and exits with status 2;
from Python it is raised as usual. Subclass it for a setting, space or value an algorithm cannot work
with, so that the runner never has to know each algorithm's own error classes.
"""
import difflib
from collections.abc import Iterable


def close_words(word: str, choices: Iterable[str], n: int = 3) -> str:
    """', '.join of the choices close to ``word`` (case-insensitive), or '' when none is close; for the
    "did you mean" part of one-line errors."""
    lower = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(word.lower(), list(lower), n=n, cutoff=0.6)
    return ", ".join(lower[h] for h in hits)


class UserError(Exception):
    """Base of every error a user can cause; the runner shows it as one line and exits with status 2.
    Anything else is a bug and keeps its traceback."""


class ConfigError(UserError, ValueError):
    """A hyperparameter, env or space that cannot be used as given; the message says what to change."""


class NonFiniteError(UserError):
    """Training produced (or an env returned) NaN or infinity; the message names the step and quantity."""

"""Exception classes for mistakes a user can make, shared by every layer.

The command line shows any ``ConfigError`` as one line (``run: error: ...``) and exits with status 2;
from Python it is raised as usual. Subclass it for a setting, space or value an algorithm cannot work
with, so that the runner never has to know each algorithm's own error classes.
"""


class ConfigError(ValueError):
    """A hyperparameter, env or space that cannot be used as given; the message says what to change."""

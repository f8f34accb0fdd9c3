"""Fixtures shared by the test files: logger state, a temporary CSV log folder, and small vec envs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from common.env_vars import LOGDIR
from common.logs import logger, progress
from common.vec_env import DummyVecEnv
from common.wrappers.monitor import Monitor


@pytest.fixture(autouse=True)
def _logs_out_of_the_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs given no ``--log_path`` log into this test's temporary folder (``RUNNER_LOGDIR``, seen by the
    subprocesses too), not into ``./logs`` of the repository; a test of the default folders unsets it."""
    monkeypatch.setenv(LOGDIR, str(tmp_path / "runner-logdir"))


@pytest.fixture(autouse=True)
def _reset_logger() -> Iterator[None]:
    """After every test: the stdout-only default logger and no active progress bar."""
    yield
    logger.reset()
    progress.set_progress(None)


@pytest.fixture
def csv_log_dir(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path``, with the logger writing progress.csv (and checkpoints) there during the test."""
    with logger.scoped_configure(str(tmp_path), format_strs=["csv"]):
        yield tmp_path


def _monitored_venv(env_id: str, n: int = 2, seed: int | None = None, **env_kwargs: Any) -> DummyVecEnv:
    import envs  # noqa: F401 - registers the project's envs (identity envs, DictObs, ...)

    venv = DummyVecEnv([lambda: Monitor(gym.make(env_id, **env_kwargs)) for _ in range(n)])
    if seed is not None:
        venv.seed(seed)
    return venv


@pytest.fixture(scope="session")
def monitored_venv() -> Callable[..., DummyVecEnv]:
    """A factory: ``monitored_venv(env_id, n=2, seed=None, **env_kwargs)`` gives ``n`` Monitor-wrapped
    ``gym.make(env_id, **env_kwargs)`` in a DummyVecEnv, seeded with ``seed`` at the first reset when given."""
    return _monitored_venv

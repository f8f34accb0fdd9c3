"""The environment variables: one prefix, former names still read, every one documented."""
import os
import re

from common import env_vars

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _declared() -> set[str]:
    return {v for k, v in vars(env_vars).items() if k.isupper() and isinstance(v, str)}


def test_new_name_wins_and_former_name_is_read(monkeypatch):
    monkeypatch.delenv("RUNNER_VERBOSE", raising=False)
    monkeypatch.setenv("RUN_VERBOSE", "1")
    assert env_vars.env_flag(env_vars.VERBOSE)
    monkeypatch.setenv("RUNNER_VERBOSE", "0")
    assert not env_vars.env_flag(env_vars.VERBOSE)
    monkeypatch.delenv("RUN_VERBOSE")
    monkeypatch.setenv("RUNNER_TF_THREADS", " 2 ")
    assert env_vars.env_text(env_vars.TF_THREADS) == "2"
    monkeypatch.delenv("RUNNER_TF_THREADS")
    assert env_vars.env_text(env_vars.TF_THREADS) == ""


def test_every_variable_the_code_reads_has_the_prefix_and_is_declared():
    read = set()
    for folder, _, files in os.walk(ROOT):
        if any(part in folder for part in (".venv", ".git", "site", "tests", "bench")):
            continue
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    read |= set(re.findall(r"""environ(?:\.get)?[\[(]["'](RUN\w*)["']""", f.read()))
    assert not read, f"read by name instead of through common.env_vars: {sorted(read)}"
    assert all(name.startswith("RUNNER_") for name in _declared())


def test_every_variable_is_in_the_docs_table():
    with open(os.path.join(ROOT, "docs", "environment-variables.md"), encoding="utf-8") as f:
        text = f.read()
    public = _declared() - {env_vars.SET_TF_LOG_LEVEL}
    missing = sorted(name for name in public if f"`{name}`" not in text)
    assert not missing, f"not in docs/environment-variables.md: {missing}"

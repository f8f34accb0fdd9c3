"""Every command shown in README.md and the guides in docs/ runs, with small budgets.

Commands are the lines of shell code blocks (fenced without a language or as sh/bash/console, or
indented): the ``$ `` lines of a block that has prompts (the other lines are output), else every line.
Each command must match one rule: the README's set-up commands (checked, not run), a ``python -m
run|tune|export|plot`` command (optionally under ``mpiexec -n K``, optionally ending in ``&``: started in
the background and waited for after the next command), or an entry of ``SKIPS`` with its reason. The
commands of one file run in order in one temporary folder, so a command may use what an earlier one
saved. Budgets are scaled down (``scaled``) so that the whole file runs in a few minutes.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from common.robotics_envs import ROBOTICS_PREFIXES

REPO = Path(__file__).resolve().parents[1]
# Not guides: the records' commands reproduce measured runs at full budgets with placeholders; DESIGN.md is
# the developers' map of the code, whose indented blocks are diagrams.
NOT_GUIDES = {"benchmarks.md", "hyperparameters.md", "DESIGN.md"}
SHELL_LANGUAGES = {"", "sh", "bash", "console", "shell"}
TIMEOUT_S = 150

BUDGET = 2048  # --num_timesteps: enough for one update of the shipped on-policy entries (8 envs x 256 steps)
OFF_POLICY_BUDGET = 400  # a few hundred gradient steps of an off-policy algorithm already take seconds
OFF_POLICY = {"deepq", "qrdqn", "rainbow", "ddpg", "sac", "td3", "tqc", "her"}
SCALED_FLAGS: dict[str, dict[str, int]] = {  # flag -> at most this value, per module
    "run": {"num_timesteps": BUDGET, "eval_freq": 1024, "checkpoint_freq": 200, "snapshot_freq": 1024,
            "save_video_interval": 1024, "save_video_length": 50},
    "tune": {"trials": 1, "seeds": 1, "budget": 2048},
}

# The README's set-up commands: requirements file and the command after the venv is made.
SETUP = [("requirements.txt", ".venv/bin/python -m run --alg=ppo2 --env=CartPole-v1 --num_env=8"),
         ("requirements-test.txt", ".venv/bin/python -m pytest -q")]
SETUP_RE = re.compile(r"python3\.11 -m venv \.venv && \.venv/bin/pip install -q -r (\S+) && (\.venv/bin/python -m .+)")
RUN_RE = re.compile(r"(?P<variables>(?:[A-Z_]+=\S+ )*)"
                    r"(?:(?:\.venv/bin/)?mpiexec -n (?P<ranks>\d+) )?(?:\.venv/bin/)?python -m "
                    r"(?P<module>run|tune|export|plot)(?P<args>(?: .*?)?)(?P<background> &)?")


def _missing(module: str) -> Callable[[], bool]:
    return lambda: importlib.util.find_spec(module) is None


@dataclass(frozen=True)
class Skip:
    pattern: str  # a regular expression matched against the whole command
    reason: str
    when: Callable[[], bool] = field(default=lambda: True)


SKIPS = [
    Skip(r".*--opponent=human.*", "needs a human at the keyboard"),
    Skip(r"pip install .*", "installs packages"),
    Skip(r"sudo apt-get install .*", "installs system packages"),
    Skip(r"mpiexec -f hostfile .*", "needs several hosts"),
    Skip(rf".*--env=({'|'.join(ROBOTICS_PREFIXES)}).*", "needs the optional extra requirements-robotics.txt (not installed)",
         _missing("gymnasium_robotics")),
    Skip(r".*--env=MinAtar/.*", "needs the optional extra requirements-minatar.txt (not installed)", _missing("minatar")),
    Skip(r".*--env=mpe2:.*", "needs mpe2 from requirements-pettingzoo.txt (not installed)", _missing("mpe2")),
    Skip(r".*--env=pettingzoo\.butterfly:pistonball.*", "one update of ppo2's pistonball entry is 20,480 agent steps "
         "(minutes); tests/test_multi_agent.py trains it through SuperSuit's wrappers with a short rollout"),
    Skip(r".*--env=pettingzoo\.classic:texas_holdem.*", "needs rlcard from requirements-pettingzoo.txt (not installed)",
         _missing("rlcard")),
]


@dataclass(frozen=True)
class DocCommand:
    file: str  # path relative to the repository
    index: int  # position among the file's commands
    line: int  # line number in the file
    text: str

    @property
    def id(self) -> str:
        return f"{self.file}-{self.index}"


def doc_files() -> list[str]:
    """README.md and every guide of docs/."""
    guides = sorted(p.name for p in (REPO / "docs").glob("*.md") if p.name not in NOT_GUIDES)
    return ["README.md", *(f"docs/{name}" for name in guides)]


def shell_blocks(text: str) -> Iterator[list[tuple[int, str]]]:
    """The shell code blocks of a markdown text: lists of (line number, line), indentation removed."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^(`{3,}|~{3,})\s*(\S*)", lines[i])
        if fence:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(fence.group(1))), len(lines))
            if fence.group(2).lower() in SHELL_LANGUAGES:
                yield [(j + 1, lines[j]) for j in range(i + 1, end)]
            i = end + 1
        elif lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            block = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                block.append((i + 1, lines[i][4:]))
                i += 1
            yield block
        else:
            i += 1


def block_commands(block: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """The commands of one block: (line number, command), continuation lines joined."""
    prompted = any(line.startswith("$ ") for _, line in block)
    pending: tuple[int, str] | None = None
    for number, line in block:
        if pending is not None:
            start, text = pending
            line = text + " " + line.strip()
            number = start
        elif prompted:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending = (number, line[:-1].strip())
            continue
        pending = None
        yield number, re.sub(r"\s+#.*$", "", line)  # a trailing comment


def extract(file: str, text: str) -> list[DocCommand]:
    found = [cmd for block in shell_blocks(text) for cmd in block_commands(block)]
    return [DocCommand(file, i, number, command) for i, (number, command) in enumerate(found)]


def documented_commands() -> list[DocCommand]:
    return [c for f in doc_files() for c in extract(f, (REPO / f).read_text(encoding="utf-8"))]


def classify(command: str) -> tuple[str, str]:
    """("setup" | "skip" | "run" | "unmatched", detail)."""
    for skip in SKIPS:
        if re.fullmatch(skip.pattern, command):
            return ("skip", skip.reason) if skip.when() else ("run", "")
    if SETUP_RE.fullmatch(command):
        return "setup", ""
    if RUN_RE.fullmatch(command):
        return "run", ""
    return "unmatched", "matched by no rule: add a rule or a SKIPS entry in tests/test_documented_commands.py"


def scaled(module: str, args: list[str]) -> list[str]:
    """``args`` with the budgets of SCALED_FLAGS lowered, and ``--num_timesteps`` added to a training run."""
    limits = dict(SCALED_FLAGS.get(module, {}))
    if module == "run" and any(a.removeprefix("--alg=") in OFF_POLICY for a in args):
        limits["num_timesteps"] = OFF_POLICY_BUDGET
    budget = limits.get("num_timesteps", BUDGET)
    out = []
    for arg in args:
        m = re.fullmatch(r"--(\w+)=(.+)", arg)
        if m and m.group(1) in limits and float(m.group(2)) > 0:
            arg = f"--{m.group(1)}={min(int(float(m.group(2))), limits[m.group(1)])}"
        out.append(arg)
    trains = module == "run" and not any(a.startswith(("--num_timesteps", "--resume", "--help")) for a in out)
    return out + ([f"--num_timesteps={budget}"] if trains else [])


def argv(command: str) -> list[str]:
    """The scaled command line to execute: this interpreter for python, its venv's mpiexec for mpiexec."""
    m = RUN_RE.fullmatch(command)
    assert m, command
    python = [sys.executable, "-m", m.group("module"), *scaled(m.group("module"), shlex.split(m.group("args")))]
    if m.group("ranks"):
        return [str(Path(sys.executable).parent / "mpiexec"), "-n", m.group("ranks"), *python]
    return python


def child_env(command: str = "") -> dict[str, str]:
    """The environment of a documented command: this one without a display, with the command's own
    ``VAR=value`` prefix."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    m = RUN_RE.fullmatch(command)
    env.update(dict(pair.split("=", 1) for pair in (m.group("variables").split() if m else [])))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["MPLBACKEND"] = "Agg"
    return env


def _background(command: str) -> bool:
    m = RUN_RE.fullmatch(command)
    return bool(m and m.group("background"))


@dataclass
class Result:
    returncode: int
    output: str


class FileRun:
    """The commands of one file, run in order in one temporary folder."""

    def __init__(self, commands: list[DocCommand]):
        self.commands = commands
        self.folder = tempfile.mkdtemp(prefix="doc-commands-")
        self.results: dict[int, Result] = {}
        self.background: dict[int, subprocess.Popen] = {}
        self.next = 0

    def result(self, index: int) -> Result:
        """The result of command ``index``, running the commands before it first (and, for a background
        command, the next one, which it runs beside)."""
        last = index + 1 if _background(self.commands[index].text) else index
        while self.next <= min(last, len(self.commands) - 1):
            self._execute(self.commands[self.next])
            self.next += 1
        self._wait_background()
        return self.results[index]

    def _execute(self, cmd: DocCommand) -> None:
        kind, _ = classify(cmd.text)
        if kind == "setup":
            cmd = DocCommand(cmd.file, cmd.index, cmd.line, SETUP_RE.fullmatch(cmd.text).group(2))
            if " -m pytest" in cmd.text:  # the suite itself is not run from here: check pytest is there
                self.results[cmd.index] = Result(0 if importlib.util.find_spec("pytest") else 1, "pytest missing")
                return
        elif kind != "run":
            return
        proc = subprocess.Popen(argv(cmd.text), cwd=self.folder, env=child_env(cmd.text), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if _background(cmd.text):
            self.background[cmd.index] = proc
            return
        self._collect(cmd.index, proc)
        self._wait_background()

    def _collect(self, index: int, proc: subprocess.Popen) -> None:
        try:
            output, _ = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            output = proc.communicate()[0] + f"\n(killed after {TIMEOUT_S} s)"
        self.results[index] = Result(proc.returncode, output)

    def _wait_background(self) -> None:
        for index, proc in list(self.background.items()):
            self._collect(index, proc)
            del self.background[index]

    def close(self) -> None:
        for proc in self.background.values():
            proc.kill()
            proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


COMMANDS = documented_commands()
_RUNS: dict[str, FileRun] = {}


@pytest.fixture(scope="module", autouse=True)
def _close_runs() -> Iterator[None]:
    yield
    for run in _RUNS.values():
        run.close()
    _RUNS.clear()


def file_run(file: str) -> FileRun:
    if file not in _RUNS:
        _RUNS[file] = FileRun([c for c in COMMANDS if c.file == file])
    return _RUNS[file]


# The README's commands run in the default suite; the guides' commands run with -m slow (as the CI does), which
# keeps the default suite within its ten minutes.
DEFAULT_SUITE_FILES = {"README.md"}


@pytest.mark.parametrize("cmd", [c if c.file in DEFAULT_SUITE_FILES else pytest.param(c, marks=pytest.mark.slow)
                                 for c in COMMANDS], ids=[c.id for c in COMMANDS])
def test_documented_command_runs(cmd: DocCommand) -> None:
    kind, detail = classify(cmd.text)
    if kind == "unmatched":
        pytest.fail(f"{cmd.file}:{cmd.line}: {cmd.text!r} is {detail}")
    if kind == "skip":
        pytest.skip(f"{cmd.file}:{cmd.line}: {detail}")
    result = file_run(cmd.file).result(cmd.index)
    assert result.returncode == 0, (f"{cmd.file}:{cmd.line}: {cmd.text}\nexit status {result.returncode}; "
                                    f"last output:\n{result.output[-3000:]}")


def test_every_documented_command_matches_a_rule() -> None:
    unmatched = [f"{c.file}:{c.line}: {c.text}" for c in COMMANDS if classify(c.text)[0] == "unmatched"]
    assert not unmatched, "commands matched by no rule:\n" + "\n".join(unmatched)


def test_readme_starts_with_the_setup_commands() -> None:
    first = [c.text for c in COMMANDS if c.file == "README.md"][:2]
    assert [SETUP_RE.fullmatch(t).groups() if SETUP_RE.fullmatch(t) else t for t in first] == SETUP
    for requirements, _ in SETUP:
        assert (REPO / requirements).is_file(), requirements


def test_the_guides_show_commands() -> None:
    per_file = {f: sum(c.file == f for c in COMMANDS) for f in doc_files()}
    assert per_file["README.md"] >= 6 and per_file["docs/usage.md"] >= 5, per_file


def test_extraction_and_rules() -> None:
    text = ("Text\n\n    python -m run --alg=ppo2 \\\n        --num_timesteps=1e6   # long\n\n"
            "```console\n$ python -m plot logs\nwrote curves.png\n```\n\n```python\nimport run\n```\n\n"
            "```\nrm -rf logs\n```\n")
    cmds = extract("x.md", text)
    assert [(c.line, c.text) for c in cmds] == [(3, "python -m run --alg=ppo2 --num_timesteps=1e6"),
                                                (7, "python -m plot logs"), (16, "rm -rf logs")]
    assert [classify(c.text)[0] for c in cmds] == ["run", "run", "unmatched"]
    assert argv(cmds[0].text)[3:] == ["--alg=ppo2", f"--num_timesteps={BUDGET}"]
    assert argv("python -m run --alg=sac --env=E")[3:] == ["--alg=sac", "--env=E", f"--num_timesteps={OFF_POLICY_BUDGET}"]
    assert argv("python -m tune --env=E --trials=20 --budget=5e4")[3:] == ["--env=E", "--trials=1", "--budget=2048"]


def test_a_broken_command_fails() -> None:
    run = FileRun([DocCommand("x.md", 0, 1, "python -m run --alg=no_such_alg --env=CartPole-v1")])
    try:
        assert run.result(0).returncode != 0
    finally:
        run.close()

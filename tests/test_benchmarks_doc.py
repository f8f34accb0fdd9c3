"""docs/benchmarks.md names, for every shipped entry, the seeds that chose it and the seeds that report it."""
import glob
import os
import re
import shutil
import tomllib

from algos.hyperparameters import env_type_entries

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
HEADING = "## Seeds that chose the entries"


def shipped_entries(tables_dir: str) -> set[tuple[str, str]]:
    """(algorithm, entry) for every `[env_type.*]` and `[env."*"]` table of tables_dir/<alg>.toml."""
    entries = set()
    for path in glob.glob(os.path.join(tables_dir, "*.toml")):
        alg = os.path.splitext(os.path.basename(path))[0]
        with open(path, "rb") as f:
            table = tomllib.load(f)
        headers = {header for header, _ in env_type_entries(table.get("env_type", {}), path).values()}
        entries |= {(alg, header[1:-1]) for header in headers}
        entries |= {(alg, f'env."{name}"') for name in table.get("env", {})}
    return entries


def section_rows(text: str) -> dict[tuple[str, str], list[str]]:
    """The seeds section's table rows by (algorithm, entry as written between backticks)."""
    start = text.index(HEADING)
    end = text.find("\n## ", start + len(HEADING))
    rows = {}
    for line in text[start:end if end >= 0 else None].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        entry = re.fullmatch(r"`([^`]+)`", cells[1]) if line.startswith("|") and len(cells) > 1 else None
        if entry:
            rows[(cells[0], entry.group(1))] = cells
    return rows


def missing_rows(tables_dir: str, text: str) -> list[tuple[str, str]]:
    """The shipped entries that have no row in the seeds section."""
    return sorted(shipped_entries(tables_dir) - set(section_rows(text)))


def _doc() -> str:
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def test_every_shipped_entry_has_a_row_with_its_seeds():
    text = _doc()
    assert missing_rows(os.path.join(ROOT, "hyperparams"), text) == []
    for key, cells in section_rows(text).items():
        assert len(cells) == 5 and all(cells), key


def test_rows_name_only_shipped_entries():
    entries = shipped_entries(os.path.join(ROOT, "hyperparams"))
    stale = [key for key in section_rows(_doc()) if key[1] != "[defaults]" and key not in entries]
    assert stale == []


def test_an_entry_added_without_a_row_is_found(tmp_path):
    shutil.copy(os.path.join(ROOT, "hyperparams", "ppo2.toml"), tmp_path)
    with open(tmp_path / "ppo2.toml", "a", encoding="utf-8") as f:
        f.write('\n[env."NewEnv-v0"]\nlr = 1e-3\n')
    assert missing_rows(str(tmp_path), _doc()) == [("ppo2", 'env."NewEnv-v0"')]


def test_the_section_stands_before_the_suites():
    text = _doc()
    assert text.index(HEADING) < text.index("\n## Suite ")

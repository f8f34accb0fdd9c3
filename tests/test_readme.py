"""The README's table of algorithms says what algos/capabilities.py declares."""
import os
import re

from algos.capabilities import CAPABILITIES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rows() -> dict[str, list[str]]:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = re.match(r"`(\w+)`", cells[0]) if len(cells) >= 5 else None
        if name:
            rows[name.group(1)] = cells
    return rows


def test_every_algorithm_has_a_row_with_its_action_spaces_and_mpi():
    rows = _rows()
    assert sorted(rows) == sorted(CAPABILITIES)
    for alg, caps in CAPABILITIES.items():
        spaces = [s.strip() for s in rows[alg][1].split(",") if s.strip() in ("Discrete", "Box", "MultiDiscrete",
                                                                                 "MultiBinary")]
        assert spaces == list(caps.action_spaces), alg
        assert rows[alg][3].startswith("yes" if caps.mpi else "no"), alg

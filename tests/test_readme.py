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


def _steps(text: str) -> int:
    """"300k" -> 300000, "1M" -> 1000000."""
    return int(float(text[:-1]) * {"k": 1_000, "M": 1_000_000}[text[-1]])


def test_every_result_is_the_unseen_seeds_median_of_a_benchmarks_row():
    """Each README figure is the seeds 10-14 median (seeds that chose no setting) of its docs/benchmarks.md row."""
    with open(os.path.join(ROOT, "docs", "benchmarks.md"), encoding="utf-8") as f:
        page = f.read().splitlines()
    checked = 0
    for alg, cells in _rows().items():
        result = re.match(r"([\w-]+), ([\d.]+[kM]) steps: (-?[\d.]+)$", cells[4])
        if result is None:
            assert "not in the benchmark suite" in cells[4], (alg, cells[4])
            continue
        env, steps, median = result.group(1), _steps(result.group(2)), result.group(3)
        start = f"| {alg} | {env} | {steps:,} | "
        rows = [line for line in page if line.startswith(start)]
        assert rows, f"README's {alg} result has no row starting {start!r} in docs/benchmarks.md"
        unseen = [line.rstrip(" |").rsplit("| ", 1)[-1] for line in rows]
        assert any(cell.startswith(f"{median} (") and all(f"{seed}: " in cell for seed in range(10, 15))
                   for cell in unseen), (alg, unseen)
        checked += 1
    assert checked >= 10

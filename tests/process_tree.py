"""Process-tree helpers for tests that check no process outlives a run (Linux /proc)."""
from __future__ import annotations

import os


def descendants(pid: int) -> list[int]:
    """Pids of every process below ``pid``."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        kids = [c for c, p in parent.items() if p == current]
        found += kids
        frontier += kids
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` exists and has not exited (a zombie waiting to be reaped has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

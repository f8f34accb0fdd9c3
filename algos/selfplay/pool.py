"""The pool of past snapshots that self-play opponents are drawn from: bounded (the oldest leaves first),
sampled ``latest``, ``uniform`` or ``prioritised`` (by how often each snapshot still beats the learner)."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from common.errors import ConfigError
from common.games.players import PolicyWeights

SAMPLINGS = ("latest", "uniform", "prioritised")
OUTCOME_DECAY = 0.9  # prioritised: older results fade, so the rates follow the current learner


@dataclasses.dataclass
class Snapshot:
    """One past policy: its name (the env steps it was taken at), its weights, and the learner's recent
    (decayed) wins, draws and losses against it."""

    name: str
    timesteps: int
    weights: PolicyWeights
    results: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(3))

    @property
    def beats_learner(self) -> float:
        """How often this snapshot beat the learner lately (a loss of the learner; 0.5 with no games yet)."""
        w, d, loss = self.results
        return float((loss + 0.5 * d + 1.0) / (w + d + loss + 2.0))


class SnapshotPool:
    """At most ``size`` snapshots, drawn with ``sampling``."""

    def __init__(self, size: int, sampling: str) -> None:
        if sampling not in SAMPLINGS:
            raise ConfigError(f"opponent_sampling must be one of {', '.join(SAMPLINGS)}, got {sampling!r}")
        self.size, self.sampling = int(size), sampling
        self.snapshots: list[Snapshot] = []

    def add(self, timesteps: int, weights: PolicyWeights) -> Snapshot:
        """Add the snapshot taken at ``timesteps``; the oldest leaves when the pool is full."""
        snap = Snapshot(str(int(timesteps)), int(timesteps), weights)
        self.snapshots = [*self.snapshots, snap][-self.size:]
        return snap

    def probs(self) -> np.ndarray:
        """The chance of each snapshot (oldest first) to be drawn as an opponent."""
        n = len(self.snapshots)
        if self.sampling == "latest":
            p = np.zeros(n)
            p[-1] = 1.0
            return p
        if self.sampling == "uniform":
            return np.full(n, 1.0 / n)
        beats = np.array([s.beats_learner for s in self.snapshots])
        return beats / beats.sum()

    def record(self, results: np.ndarray) -> None:
        """Add the learner's [wins, draws, losses] against each snapshot (rows in pool order), older results
        decayed."""
        for snap, row in zip(self.snapshots, np.asarray(results, np.float64)):
            snap.results = snap.results * OUTCOME_DECAY + row

    def state(self, template: PolicyWeights) -> dict:
        """The pool as fixed-size arrays (``size`` slots shaped like ``template``'s arrays; the first
        ``count`` filled), for training-state checkpoints."""
        def stacked(get: Callable[[PolicyWeights], np.ndarray]) -> np.ndarray:
            out = np.zeros((self.size, *np.shape(get(template))), np.float32)
            for i, snap in enumerate(self.snapshots):
                out[i] = get(snap.weights)
            return out

        results = np.zeros((self.size, 3))
        timesteps = np.zeros(self.size, np.int64)
        for i, snap in enumerate(self.snapshots):
            results[i], timesteps[i] = snap.results, snap.timesteps
        return {"count": len(self.snapshots), "timesteps": timesteps, "results": results,
                "pi_w": stacked(lambda w: w.pi_w), "pi_b": stacked(lambda w: w.pi_b),
                "hidden": [stacked(lambda w, k=k: w.hidden[k]) for k in range(len(template.hidden))]}

    def load_state(self, state: dict, template: PolicyWeights) -> None:
        """Restore what ``state`` returned (snapshots shaped like ``template``)."""
        self.snapshots = []
        for i in range(int(state["count"])):
            weights = dataclasses.replace(template, hidden=[np.array(h[i]) for h in state["hidden"]],
                                          pi_w=np.array(state["pi_w"][i]), pi_b=np.array(state["pi_b"][i]))
            snap = self.add(int(state["timesteps"][i]), weights)
            snap.results = np.array(state["results"][i], np.float64)

    def names(self) -> list[str]:
        return [s.name for s in self.snapshots]

    def payload(self) -> list[tuple[str, PolicyWeights]]:
        """What the env workers need: (name, weights) of each snapshot."""
        return [(s.name, s.weights) for s in self.snapshots]

"""Run one of CleanRL's single-file scripts as it is, saving its network every fixed number of env steps.

    /work/cleanrl-venv/bin/python bench/tts_cleanrl.py JOB_JSON    (the venv of bench/requirements-cleanrl.txt)

The job gives the script's path, its command-line flags, the name of the network it trains (a global of the
script: ``agent``, ``q_network`` or ``actor``), the checkpoint folder and the env steps between checkpoints.
The script runs unchanged as ``__main__`` (``runpy``); the vector env's ``step`` is wrapped to count env steps,
and every ``every`` of them, and at the end, ``torch.save`` writes the network's ``state_dict`` (the scripts'
own way of saving) to ``<folder>/<steps>.pt``, inside the timed run.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from typing import Any

import gymnasium as gym
import torch


def main(job: dict[str, Any]) -> None:
    folder, every, network = job["folder"], job["every"], job["network"]
    os.makedirs(folder, exist_ok=True)
    state = {"steps": 0, "next": every, "saved": -1}

    def save(script_globals: dict[str, Any]) -> None:
        net = script_globals.get(network)
        if net is None or state["saved"] == state["steps"]:
            return
        torch.save(net.state_dict(), os.path.join(folder, f"{state['steps']:010d}.pt"))
        state["saved"] = state["steps"]

    step = gym.vector.SyncVectorEnv.step

    def counted_step(self: gym.vector.SyncVectorEnv, actions: Any) -> Any:
        out = step(self, actions)
        state["steps"] += self.num_envs
        if state["steps"] >= state["next"]:
            save(vars(sys.modules["__main__"]))  # the script's module while it runs
            while state["next"] <= state["steps"]:
                state["next"] += every
        return out

    gym.vector.SyncVectorEnv.step = counted_step
    sys.argv = [job["script"], *job["flags"]]
    save(runpy.run_path(job["script"], run_name="__main__"))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))

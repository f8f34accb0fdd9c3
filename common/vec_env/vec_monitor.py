"""VecMonitor: episode statistics for a whole vec env (when the envs themselves are not wrapped in Monitor)."""

from __future__ import annotations

import time

import numpy as np

from common.vec_env.base import VecEnv, VecEnvWrapper, VecObs, VecStepReturn
from common.wrappers.monitor import ResultsWriter


class VecMonitor(VecEnvWrapper):
    """Adds ``info["episode"] = {"r", "l", "t"}`` at each episode end and optionally writes a monitor CSV.

    Args:
        venv: the vec env to watch.
        filename: where to write ``<filename>.monitor.csv``; None writes nothing.
        info_keywords: keys of the final step's info recorded in the CSV.
    """

    def __init__(self, venv: VecEnv, filename: str | None = None, info_keywords: tuple[str, ...] = ()) -> None:
        super().__init__(venv)
        self.t_start = time.time()
        self.info_keywords = tuple(info_keywords)
        self.episode_returns = np.zeros(self.num_envs, dtype=np.float64)
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int64)
        self.episode_count = 0
        self.results_writer = None
        if filename is not None:
            self.results_writer = ResultsWriter(filename, {"t_start": self.t_start, "env_id": None},
                                                self.info_keywords)

    def reset(self) -> VecObs:
        obs = self.venv.reset()
        self.episode_returns[:] = 0
        self.episode_lengths[:] = 0
        return obs

    def step_wait(self) -> VecStepReturn:
        obs, rews, dones, infos = self.venv.step_wait()
        self.episode_returns += rews
        self.episode_lengths += 1
        for i in np.flatnonzero(dones):
            ep = {"r": round(float(self.episode_returns[i]), 6), "l": int(self.episode_lengths[i]),
                  "t": round(time.time() - self.t_start, 6)}
            infos[i] = dict(infos[i])
            infos[i]["episode"] = ep
            if self.results_writer is not None:
                self.results_writer.write_row({**ep, **{k: infos[i][k] for k in self.info_keywords}})
            self.episode_returns[i] = 0
            self.episode_lengths[i] = 0
            self.episode_count += 1
        return obs, rews, dones, infos

    def close(self) -> None:
        super().close()
        if self.results_writer is not None:
            self.results_writer.close()

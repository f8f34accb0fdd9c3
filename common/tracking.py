"""Experiment tracking with Weights & Biases (``--track``; ``pip install -r requirements-track.txt``).

A tracked run sends every key the logger dumps (at the step ``time/total_timesteps``), the resolved
configuration, and at its end the learning curve image and the videos of the run. The W&B run lives in
``<log_path>/wandb``; ``WANDB_MODE=offline`` keeps it there (``wandb sync`` uploads it later). Its id is kept in
``<log_path>/wandb_run_id.txt``, so ``--resume`` continues the same W&B run. Under MPI rank 0 reports. wandb is
imported only when ``--track`` is given.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Sequence
from typing import Any

from common.errors import UserError
from common.logs.log_formats import OutputFormat, to_builtin

STEP_KEY = "time/total_timesteps"
INSTALL = "pip install -r requirements-track.txt"
RUN_ID_FILE = "wandb_run_id.txt"  # in the log folder: the W&B run that --resume continues
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


class TrackingError(UserError):
    """``--track`` cannot work (wandb missing, or its start failed)."""


def parse_tags(text: str | None) -> list[str]:
    """``--wandb_tags=a,b``: the tags, empty ones dropped."""
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def _wandb() -> Any:
    try:
        import wandb
    except ImportError:
        raise TrackingError(f"--track needs the wandb package: {INSTALL}") from None
    return wandb


def check_available() -> None:
    """TrackingError (one line) when wandb is not installed."""
    _wandb()


class WandbOutput(OutputFormat):
    """A logger output that sends each dump's numeric keys to a W&B run."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def writekvs(self, kvs: dict[str, Any]) -> None:
        values = {k: v for k, v in ((k, to_builtin(v)) for k, v in kvs.items())
                  if isinstance(v, (int, float)) and not isinstance(v, bool)}
        step = values.get(STEP_KEY)
        if step is not None and int(step) < self.run.step:
            return  # a resumed run logs again the steps after its checkpoint; W&B holds them already
        self.run.log(values, step=int(step) if step is not None else None)

    def where(self) -> str:
        return "wandb"


def saved_run_id(log_dir: str) -> str | None:
    """The W&B run id kept in ``log_dir`` (None when there is none); TrackingError (one line) when the file
    holds something else."""
    path = os.path.join(log_dir, RUN_ID_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(200).strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise TrackingError(f"--resume: cannot read the W&B run id in {path} ({e})") from None
    if not RUN_ID.fullmatch(text):
        raise TrackingError(f"--resume: {path} does not hold a W&B run id; delete it to start a new W&B run")
    return text


class Tracker:
    """One tracked run: started with the configuration, fed by the logger, finished with its media.

    Args:
        config: the resolved configuration (``RunConfig.record()``).
        log_dir: the run's log folder (the W&B files go to ``<log_dir>/wandb``, the run's id to
            ``<log_dir>/wandb_run_id.txt``).
        project, entity, group, tags, name: W&B's.
        resume: continue the W&B run whose id the log folder keeps (a new run when it keeps none).
    """

    def __init__(self, config: dict[str, Any], log_dir: str, project: str, entity: str | None = None,
                 group: str | None = None, tags: Sequence[str] = (), name: str | None = None,
                 resume: bool = False) -> None:
        wandb = _wandb()
        self.log_dir = log_dir
        run_id = saved_run_id(log_dir) if resume else None
        try:
            self.run = wandb.init(project=project, entity=entity, group=group, tags=list(tags) or None, name=name,
                                  config=json.loads(json.dumps(config, default=repr)), dir=log_dir,
                                  settings=wandb.Settings(console="off"), id=run_id,
                                  resume="allow" if run_id else None, allow_val_change=bool(run_id))
        except (wandb.errors.Error, ValueError) as e:  # a bad entity or project name, no login while online
            raise TrackingError(f"--track: wandb could not start ({str(e).strip().splitlines()[0]})") from e
        if run_id is None:
            with open(os.path.join(log_dir, RUN_ID_FILE), "w", encoding="utf-8") as f:
                f.write(f"{self.run.id}\n")
        self.output = WandbOutput(self.run)

    def finish(self, video_folders: Sequence[str | None] = ()) -> None:
        """Send the learning curve and the videos found, then close the W&B run."""
        wandb = _wandb()
        media: dict[str, Any] = {}
        curve = os.path.join(self.log_dir, "learning_curve.png")
        if os.path.isfile(curve):
            media["media/learning_curve"] = wandb.Image(curve)
        for folder in [os.path.join(self.log_dir, "videos"), *video_folders]:
            for path in sorted(glob.glob(os.path.join(folder or "", "*.mp4"))):
                name = os.path.splitext(os.path.basename(path))[0]
                media[f"media/videos/{name}"] = wandb.Video(path, format="mp4")
        if media:
            self.run.log(media)
        self.run.finish()

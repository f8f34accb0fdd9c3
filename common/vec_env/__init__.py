"""Vectorized environments: a batch of gymnasium envs behind one step() call.

Never imports tensorflow: worker processes must start fast and small.
"""

from common.vec_env.base import (
    AlreadySteppingError,
    ClosedVecEnvError,
    EnvWorkerError,
    NotSteppingError,
    VecEnv,
    VecEnvError,
    VecEnvWrapper,
    env_traceback,
)
from common.vec_env.dummy_vec_env import DummyVecEnv
from common.vec_env.subproc_vec_env import SubprocVecEnv
from common.vec_env.util import CloudpickleWrapper, clear_mpi_env_vars, tile_images
from common.vec_env.vec_frame_stack import VecFrameStack
from common.vec_env.vec_monitor import VecMonitor
from common.vec_env.vec_normalize import VecNormalize, unwrap_vec_normalize

__all__ = [
    "AlreadySteppingError", "ClosedVecEnvError", "CloudpickleWrapper", "DummyVecEnv", "EnvWorkerError",
    "NotSteppingError",
    "SubprocVecEnv", "VecEnv", "VecEnvError", "VecEnvWrapper", "VecFrameStack", "VecMonitor", "VecNormalize", "clear_mpi_env_vars", "env_traceback", "tile_images",
    "unwrap_vec_normalize",
]

"""The models of ``--alg=her``: the off-policy actor-critic named by ``her_algorithm``, saved as ``her``.

HER changes what is replayed, not the networks or the losses: each class here is its base algorithm's
model under the name ``her``, so a file records ``her`` with its ``her_algorithm`` (and the goal env's Dict
observation space), and ``algos.her.her.load`` rebuilds the same class from it. The network input of a
Dict observation is its keys' encodings concatenated in the space's key order (gymnasium sorts the keys:
``achieved_goal``, ``desired_goal``, ``observation``), as ``common.nn.obs_encoding.ObsEncoder`` does; image
keys, if any, go through CNNs as in ddpg/sac/td3/tqc (``MultiInputEncoder``: one multi-input path for all).
"""
from __future__ import annotations

from algos.ddpg.model import DDPGModel
from algos.sac.model import SACModel
from algos.td3.model import TD3Model
from algos.tqc.model import TQCModel


class HerDDPGModel(DDPGModel):
    """ddpg's model trained with hindsight replay."""

    algorithm = "her"


class HerSACModel(SACModel):
    """sac's model trained with hindsight replay."""

    algorithm = "her"


class HerTD3Model(TD3Model):
    """td3's model trained with hindsight replay."""

    algorithm = "her"


class HerTQCModel(TQCModel):
    """tqc's model trained with hindsight replay."""

    algorithm = "her"


HER_MODELS = {"ddpg": HerDDPGModel, "sac": HerSACModel, "td3": HerTD3Model, "tqc": HerTQCModel}

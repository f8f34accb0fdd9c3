"""Our own environments; importing this package registers them with gymnasium.

Registered ids (all time-limited to 100 steps unless ``max_episode_steps`` is given to ``gymnasium.make``):
"IdentityDiscrete-v0", "IdentityBox-v0", "IdentityMultiDiscrete-v0", "DictObs-v0", "CpuBurn-v0",
"Faulty-v0" (misbehaves on purpose: ``envs.faulty``), "MaskedBandit-v0" (action masks, 16 steps per
episode: ``envs.masked_bandit``); "TicTacToe-v0" (``envs.tictactoe``, a two-player game seen by one learner,
not time-limited); "ThreeInARow-v0" (``envs.three_in_a_row``, a game of 3 players by default, seen by one
learner, not time-limited); the goal env "BitFlipping-v0" (``envs.bit_flipping``: n_bits=8, continuous actions; its
episodes last n_bits steps, no registry time limit); "DictImage-v0" (``envs.dict_obs.DictImageEnv``: an image
key and a vector key, Box actions, 20 steps per episode).
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from envs.bit_flipping import BitFlippingEnv
from envs.cpu_burn import CpuBurnEnv
from envs.dict_obs import DictImageEnv, DictObsEnv
from envs.faulty import FaultyEnv
from envs.identity import IdentityBoxEnv, IdentityDiscreteEnv, IdentityMultiDiscreteEnv
from envs.masked_bandit import MaskedBanditEnv

__all__ = ["BitFlippingEnv", "CpuBurnEnv", "DictImageEnv", "DictObsEnv", "FaultyEnv", "IdentityBoxEnv", "IdentityDiscreteEnv",
           "IdentityMultiDiscreteEnv", "MaskedBanditEnv"]

_ENVS = {
    "IdentityDiscrete-v0": "envs.identity:IdentityDiscreteEnv",
    "IdentityBox-v0": "envs.identity:IdentityBoxEnv",
    "IdentityMultiDiscrete-v0": "envs.identity:IdentityMultiDiscreteEnv",
    "DictObs-v0": "envs.dict_obs:DictObsEnv",
    "CpuBurn-v0": "envs.cpu_burn:CpuBurnEnv",
    "Faulty-v0": "envs.faulty:FaultyEnv",
}

for _env_id, _entry_point in _ENVS.items():
    if _env_id not in registry:
        register(id=_env_id, entry_point=_entry_point, max_episode_steps=100)

if "DictImage-v0" not in registry:
    register(id="DictImage-v0", entry_point="envs.dict_obs:DictImageEnv", max_episode_steps=20)
if "MaskedBandit-v0" not in registry:
    register(id="MaskedBandit-v0", entry_point="envs.masked_bandit:MaskedBanditEnv", max_episode_steps=16)
if "TicTacToe-v0" not in registry:
    register(id="TicTacToe-v0", entry_point="envs.tictactoe:make_env")
if "BitFlipping-v0" not in registry:  # its own time limit: n_bits steps
    register(id="BitFlipping-v0", entry_point="envs.bit_flipping:BitFlippingEnv")
if "ThreeInARow-v0" not in registry:
    register(id="ThreeInARow-v0", entry_point="envs.three_in_a_row:make_env")

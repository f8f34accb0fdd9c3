"""What each algorithm of this project can train on, declared once: action spaces, Dict observations kept
as Dicts, MPI, recurrent networks; its default number of training envs, and what helps it when its first
episodes all end the same way at the time limit. The runner reads this table without importing the
algorithm (and so without TensorFlow); the README's table of algorithms is checked against it."""
from __future__ import annotations

import dataclasses

from algos.base import ALIASES

ALL_ACTION_SPACES = ("Discrete", "Box", "MultiDiscrete", "MultiBinary")


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """One algorithm's capabilities."""

    action_spaces: tuple[str, ...]
    keeps_dict_observations: bool  # Dict observations reach the model as Dicts (else flattened by the runner)
    mpi: bool  # trains under mpiexec with gradients averaged over ranks
    recurrent: bool  # takes recurrent networks (lstm, cnn_lstm)
    # what helps when its first episodes all return the same value at the time limit (None: nothing to say)
    no_signal_advice: str | None
    default_num_env: int = 1  # training envs per rank when no source sets num_env (atari: one per CPU core)


# what helps each kind of algorithm see another outcome than the one its first episodes all had
EPSILON_ADVICE = "longer epsilon exploration (--exploration_fraction=0.5) or noisy layers (--noisy=True) may help"
ENTROPY_ADVICE = "an entropy bonus (--ent_coef=0.01) and more envs (--num_env=8) may help"
NOISE_ADVICE = "stronger exploration noise (--noise_type=ou_0.5) may help"
TEMPERATURE_ADVICE = ("a higher entropy target (--target_entropy=0) or a higher fixed temperature "
                      "(--ent_coef=0.5) may help")
RAINBOW_ADVICE = ("stronger noisy layers (--noisy_sigma0=1.0) or epsilon exploration (--noisy=False "
                  "--exploration_fraction=0.5) may help")


CAPABILITIES = {
    "a2c": Capabilities(ALL_ACTION_SPACES, keeps_dict_observations=False, mpi=True, recurrent=True,
                        no_signal_advice=ENTROPY_ADVICE, default_num_env=8),  # many synchronous envs
    "ddpg": Capabilities(("Box",), keeps_dict_observations=True, mpi=True, recurrent=False,
                         no_signal_advice=NOISE_ADVICE),
    "deepq": Capabilities(("Discrete",), keeps_dict_observations=False, mpi=False, recurrent=False,
                          no_signal_advice=EPSILON_ADVICE),
    "her": Capabilities(("Box",), keeps_dict_observations=True, mpi=True, recurrent=False,
                        no_signal_advice=None),  # made for sparse rewards: its first episodes are all failures
    "qrdqn": Capabilities(("Discrete",), keeps_dict_observations=False, mpi=False, recurrent=False,
                          no_signal_advice=EPSILON_ADVICE),
    "rainbow": Capabilities(("Discrete",), keeps_dict_observations=False, mpi=False, recurrent=False,
                            no_signal_advice=RAINBOW_ADVICE),
    "ppo2": Capabilities(ALL_ACTION_SPACES, keeps_dict_observations=False, mpi=True, recurrent=True,
                         no_signal_advice=ENTROPY_ADVICE),
    "sac": Capabilities(("Box",), keeps_dict_observations=True, mpi=True, recurrent=False,
                        no_signal_advice=TEMPERATURE_ADVICE),
    "td3": Capabilities(("Box",), keeps_dict_observations=True, mpi=True, recurrent=False,
                        no_signal_advice=NOISE_ADVICE),
    "tqc": Capabilities(("Box",), keeps_dict_observations=True, mpi=True, recurrent=False,
                        no_signal_advice=TEMPERATURE_ADVICE),
    "trpo": Capabilities(ALL_ACTION_SPACES, keeps_dict_observations=False, mpi=True, recurrent=False,
                         no_signal_advice=ENTROPY_ADVICE),
}


def keeps_dict_observations(alg: str, learn: object) -> bool:
    """Whether ``alg`` takes Dict observations as Dicts: from the table for this project's algorithms, from
    the ``keeps_dict_observations`` attribute of ``learn`` for a user's ``--alg=module:function``."""
    found = CAPABILITIES.get(alg)
    return found.keeps_dict_observations if found else bool(getattr(learn, "keeps_dict_observations", False))


def default_num_env(alg: str) -> int:
    """The training envs per rank of ``alg`` (an alias or ``module:function`` too) when nothing sets num_env."""
    found = CAPABILITIES.get(ALIASES.get(alg, alg))
    return found.default_num_env if found else 1


def no_signal_advice(alg: str | None) -> str | None:
    """What helps ``alg`` when its first episodes all return the same value at the time limit (None: nothing)."""
    found = CAPABILITIES.get(alg or "")
    return found.no_signal_advice if found else None

"""What each algorithm of this project can train on, declared once: action spaces, Dict observations kept
as Dicts, MPI, recurrent networks. The runner reads this table without importing the algorithm (and so
without TensorFlow); the README's table of algorithms is checked against it."""
from __future__ import annotations

import dataclasses

ALL_ACTION_SPACES = ("Discrete", "Box", "MultiDiscrete", "MultiBinary")


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """One algorithm's capabilities."""

    action_spaces: tuple[str, ...]
    keeps_dict_observations: bool  # Dict observations reach the model as Dicts (else flattened by the runner)
    mpi: bool  # trains under mpiexec with gradients averaged over ranks
    recurrent: bool  # takes recurrent networks (lstm, cnn_lstm)


CAPABILITIES = {
    "a2c": Capabilities(ALL_ACTION_SPACES, keeps_dict_observations=False, mpi=True, recurrent=True),
    "ddpg": Capabilities(("Box",), keeps_dict_observations=True, mpi=True, recurrent=False),
    "deepq": Capabilities(("Discrete",), keeps_dict_observations=False, mpi=False, recurrent=False),
    "her": Capabilities(("Box",), keeps_dict_observations=True, mpi=True, recurrent=False),
    "qrdqn": Capabilities(("Discrete",), keeps_dict_observations=False, mpi=False, recurrent=False),
    "rainbow": Capabilities(("Discrete",), keeps_dict_observations=False, mpi=False, recurrent=False),
    "ppo2": Capabilities(ALL_ACTION_SPACES, keeps_dict_observations=False, mpi=True, recurrent=True),
    "sac": Capabilities(("Box",), keeps_dict_observations=True, mpi=True, recurrent=False),
    "td3": Capabilities(("Box",), keeps_dict_observations=True, mpi=True, recurrent=False),
    "tqc": Capabilities(("Box",), keeps_dict_observations=True, mpi=True, recurrent=False),
    "trpo": Capabilities(ALL_ACTION_SPACES, keeps_dict_observations=False, mpi=True, recurrent=False),
}


def keeps_dict_observations(alg: str, learn: object) -> bool:
    """Whether ``alg`` takes Dict observations as Dicts: from the table for this project's algorithms, from
    the ``keeps_dict_observations`` attribute of ``learn`` for a user's ``--alg=module:function``."""
    found = CAPABILITIES.get(alg)
    return found.keeps_dict_observations if found else bool(getattr(learn, "keeps_dict_observations", False))

"""Numpy copies of an actor-critic's policy (``PolicyWeights``), the form in which opponents get a policy:
copies, so that training the learner never changes an opponent."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from common.errors import ConfigError
from common.games.players import PolicyWeights
from common.nn.numpy_layers import NUMPY_ACTIVATIONS


def check_policy(model: Any) -> None:
    """ConfigError unless ``model``'s policy can be copied to numpy: a feed-forward mlp or ``board_cnn`` with
    Discrete actions."""
    policy = model.policy
    if policy.recurrent or not policy.numpy_acting or not hasattr(policy.net, "numpy_params"):
        raise ConfigError("self-play opponents act from numpy copies of the policy: use the mlp network "
                          "(with a named activation) or board_cnn")
    if not isinstance(model.action_space, gym.spaces.Discrete):
        raise ConfigError(f"self-play needs a Discrete action space (game moves), got {model.action_space}")


def policy_weights(model: Any) -> PolicyWeights:
    """A numpy copy of the current policy of ``model`` (an ``ActorCriticModel`` with an mlp or board_cnn)."""
    check_policy(model)
    policy = model.policy
    net = policy.net
    activation = next(name for name, fn in NUMPY_ACTIVATIONS.items() if fn is net._np_act)
    params = [np.array(a, np.float32, copy=True) for a in net.numpy_params()]
    convs = tuple(net.numpy_conv_params(params)) if hasattr(net, "numpy_conv_params") else ()
    return PolicyWeights(hidden=params[2 * len(convs):], convs=convs,
                         image_shape=tuple(getattr(net, "image_shape", ())),
                         num_layers=len(net.layers), layer_norm=bool(net.layer_norm), activation=activation,
                         pi_w=np.array(policy.pi.w.numpy(), np.float32, copy=True),
                         pi_b=np.array(policy.pi.b.numpy(), np.float32, copy=True),
                         image=bool(policy.encoder.is_image))

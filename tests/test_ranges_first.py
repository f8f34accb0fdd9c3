"""The declared [ranges] of hyperparams/<alg>.toml refuse a value before any algorithm's own code runs: from the
command line (``run.main``) and from ``learn()`` called from Python, in one line naming the table."""
from __future__ import annotations

import importlib
import re

import pytest

import run
from common.errors import ConfigError

ENVS = {"a2c": "CartPole-v1", "ppo2": "TicTacToe-v0", "trpo": "CartPole-v1", "deepq": "CartPole-v1",
        "rainbow": "CartPole-v1", "ddpg": "Pendulum-v1", "sac": "Pendulum-v1", "td3": "Pendulum-v1",
        "tqc": "Pendulum-v1", "her": "BitFlipping-v0"}
OFF_POLICY = ("train_freq", "gradient_steps", "batch_size", "buffer_size", "log_interval")
SELF_PLAY = {"snapshot_freq": 0, "pool_size": 0, "random_opponents": 2, "opponent_epsilon": -1,
             "random_first_move": 2, "random_opening": 2, "lookahead_opponents": 2}
# (algorithm, setting, value outside its range, other settings): the settings whose range makes a check of the
# algorithm's own code unnecessary
CASES = [
    ("a2c", "nsteps", 0, {}), ("a2c", "log_interval", 0, {}),
    *[("trpo", name, value, {}) for name, value in (("timesteps_per_batch", 0), ("vf_iters", -1),
                                                    ("vf_batch_size", 0), ("log_interval", 0))],
    *[("td3", name, 0, {}) for name in (*OFF_POLICY, "param_noise_adaption_interval", "policy_delay")],
    ("td3", "target_policy_noise", -0.1, {}), ("td3", "target_noise_clip", -0.1, {}),
    *[(alg, name, 0, {}) for alg in ("sac", "tqc") for name in OFF_POLICY],
    *[("ddpg", name, 0, {}) for name in ("nb_rollout_steps", "nb_train_steps", "batch_size", "buffer_size",
                                         "log_interval", "param_noise_adaption_interval")],
    *[("her", name, 0, {}) for name in (*OFF_POLICY, "param_noise_adaption_interval")],
    ("her", "n_sampled_goal", -1, {}),
    ("deepq", "param_noise_adaption_interval", 0, {"param_noise": True}),
    *[("deepq", name, 0, {}) for name in ("buffer_size", "train_freq", "batch_size", "gradient_steps",
                                          "gradient_steps_per_call")],
    ("rainbow", "buffer_size", 0, {}),
    *[("ppo2", name, value, {"self_play": True}) for name, value in SELF_PLAY.items()],
]
IDS = [f"{alg}-{name}" for alg, name, _, _ in CASES]


def _message(alg: str, name: str, value, prefix: str) -> str:
    return rf"^{prefix}{name} must be (at least|at most) -?[\d.]+ \(hyperparams/{alg}\.toml \[ranges\]\), got {value}$"


@pytest.mark.parametrize(("alg", "name", "value", "others"), CASES, ids=IDS)
def test_the_command_line_refuses_a_value_outside_its_range_in_one_line(tmp_path, alg, name, value, others) -> None:
    argv = [f"--alg={alg}", f"--env={ENVS[alg]}", "--num_timesteps=512", f"--log_path={tmp_path / 'log'}",
            *[f"--{k}={v}" for k, v in others.items()], f"--{name}={value}"]
    with pytest.raises(ConfigError) as e:
        run.main(argv)
    assert re.match(_message(alg, name, value, "--"), str(e.value)), str(e.value)


@pytest.fixture(scope="module")
def venvs():
    """One small vec env per env id, shared by the module's tests (no test steps them)."""
    from tests.conftest import _monitored_venv

    made: dict = {}
    yield lambda env_id: made.setdefault(env_id, _monitored_venv(env_id, n=1))
    for env in made.values():
        env.close()


@pytest.mark.parametrize(("alg", "name", "value", "others"), CASES, ids=IDS)
def test_learn_refuses_a_value_outside_its_range_in_one_line(venvs, alg, name, value, others) -> None:
    learn = importlib.import_module(f"algos.{alg}.{alg}").learn
    with pytest.raises(ConfigError) as e:
        learn(env=venvs(ENVS[alg]), total_timesteps=512, **others, **{name: value})
    assert re.match(_message(alg, name, value, ""), str(e.value)), str(e.value)

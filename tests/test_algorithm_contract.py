"""The contract every registered algorithm keeps (algos/base.py): a new algorithm is covered by being
a folder of algos/, with no new test code. Each algorithm runs a short budget with its own defaults on
the first identity env whose action space it accepts. The off-policy actor-critics are covered once more
with Dict observations (an image key and a vector key: DictImage-v0), kept per key and flattened."""
import os
import subprocess
import sys

import numpy as np
import pytest

from algos.base import algorithm_module, algorithm_names, load_model
from common.errors import ConfigError
from common.files.model_file import ModelFileError, load_model_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV_IDS = ("IdentityDiscrete-v0", "IdentityBox-v0")  # tried in this order
GOAL_ENV_IDS = {"her": ("BitFlipping-v0",)}  # algorithms for goal envs (Dict observations kept as Dicts)
BUDGET = 4096  # two ppo2 updates with its default nsteps on 2 envs (a2c: 409 updates of 10 steps)
# Settings beyond the defaults, per algorithm: sac, td3 and qrdqn train every one to four env steps by default (one
# TF call each); the contract is about models and files, so they train in blocks here.
SETTINGS = {"sac": {"train_freq": 64, "gradient_steps": 16}, "td3": {"train_freq": 64, "gradient_steps": 16},
            "tqc": {"train_freq": 64, "gradient_steps": 16},
            "qrdqn": {"train_freq": 64, "gradient_steps": 4, "buffer_size": BUDGET},
            "her": {"train_freq": 64, "gradient_steps": 16, "learning_starts": 256}}
# Dict-observation cases "<alg>:<dict_observations>": two training blocks of a few small gradient steps
# (a CNN per image key and network makes each step costly; the contract is about models and files).
DICT_ENV_ID = "DictImage-v0"
DICT_CASES = [f"{alg}:{mode}" for alg in ("ddpg", "sac", "td3", "tqc") for mode in ("keep", "flatten")]
DEFAULT_DICT_CASES = ("sac:keep", "ddpg:flatten")  # in the default suite; the others run with -m slow
DICT_ENVS = 8  # fewer vec-env steps: the actor of an image key acts through TF
DICT_SETTINGS = {"ddpg": {"nb_rollout_steps": 256, "nb_train_steps": 4, "noise_type": "normal_0.1"},
                 "sac": {"train_freq": 256, "gradient_steps": 4}, "td3": {"train_freq": 256, "gradient_steps": 4},
                 "tqc": {"train_freq": 256, "gradient_steps": 4}}


def _train(case: str, monitored_venv, seed: int = 0):
    """(model, env_id) after a short run on the first identity env the case's algorithm accepts (a Dict
    case "<alg>:<mode>": on DictImage-v0 with ``dict_observations=mode``)."""
    alg, _, mode = case.partition(":")
    learn = algorithm_module(alg).learn
    env_ids = (DICT_ENV_ID,) if mode else GOAL_ENV_IDS.get(alg, ENV_IDS)
    settings = {**DICT_SETTINGS[alg], "batch_size": 16, "buffer_size": BUDGET, "learning_starts": 256,
                "dict_observations": mode} if mode else SETTINGS.get(alg, {})
    for env_id in env_ids:
        env = monitored_venv(env_id, DICT_ENVS if mode else 2)
        try:
            return learn(env=env, total_timesteps=BUDGET, seed=seed, num_hidden=16, **settings), env_id
        except ConfigError:
            continue
        finally:
            env.close()
    pytest.fail(f"{alg} accepts none of {env_ids}")


def _observations(env_id: str, monitored_venv, n: int = 32):
    env = monitored_venv(env_id, 1)
    space = env.observation_space
    space.seed(0)
    env.close()
    items = [space.sample() for _ in range(n)]
    if isinstance(items[0], dict):  # a Dict batch as a vec env gives it
        return {k: np.stack([o[k] for o in items]) for k in items[0]}
    return np.stack(items)


@pytest.fixture(scope="module", params=algorithm_names() + [
    c if c in DEFAULT_DICT_CASES else pytest.param(c, marks=pytest.mark.slow) for c in DICT_CASES])
def trained(request, tmp_path_factory, monitored_venv):
    """(case, model, env_id, path of its saved file); a case is an algorithm name or a Dict case."""
    case = request.param
    model, env_id = _train(case, monitored_venv)
    path = str(tmp_path_factory.mktemp(case.replace(":", "-")) / "model.zip")
    model.save(path)
    return case, model, env_id, path


def test_save_load_predict_identically(trained, monitored_venv):
    """A loaded file gives the same predictions, step count and arrays; it is a plain-data archive that
    names its algorithm and network kwargs."""
    case, model, env_id, path = trained
    loaded = load_model(path)
    assert type(loaded) is type(model) and loaded.algorithm == case.partition(":")[0]
    obs = _observations(env_id, monitored_venv)
    np.testing.assert_array_equal(loaded.predict(obs)[0], model.predict(obs)[0])
    assert loaded.num_timesteps == model.num_timesteps  # the budget in whole rollouts/blocks
    assert BUDGET * 0.9 < model.num_timesteps <= BUDGET
    saved, restored = model.get_arrays(), loaded.get_arrays()
    assert set(restored) == set(saved)
    for name, array in saved.items():
        np.testing.assert_array_equal(restored[name], array, err_msg=name)
    metadata, _ = load_model_file(path)
    assert metadata["algorithm"] == loaded.algorithm and metadata["network_kwargs"] == {"num_hidden": 16}
    with np.load(path, allow_pickle=False) as archive:  # plain data: readable without unpickling
        assert set(saved) <= set(archive.files)


def test_one_observation_gives_one_action(trained, monitored_venv):
    """``predict`` of one observation (shaped as the space, Dict ones too) gives that observation's action
    of a batch, without the env axis (up to float rounding: TF's kernels may sum in another order for
    another batch size)."""
    _, _, env_id, path = trained
    loaded = load_model(path)
    obs = _observations(env_id, monitored_venv, n=3)
    batch, _ = loaded.predict(obs)
    for i in range(3):
        one = {k: v[i] for k, v in obs.items()} if isinstance(obs, dict) else obs[i]
        action, state = loaded.predict(one)
        assert np.shape(action) == np.shape(batch[i]) and state is None
        np.testing.assert_allclose(action, batch[i], rtol=1e-5, atol=1e-6)


def test_same_seed_gives_identical_arrays(trained, monitored_venv):
    alg, model, _, _ = trained
    again, _ = _train(alg, monitored_venv)
    first, second = model.get_arrays(), again.get_arrays()
    assert all(np.array_equal(first[k], second[k]) for k in first)


def test_file_for_other_spaces_is_refused(trained, monitored_venv):
    _, _, env_id, path = trained
    other = "IdentityBox-v0" if env_id == "IdentityDiscrete-v0" else "IdentityDiscrete-v0"
    env = monitored_venv(other, 1)
    with pytest.raises(ModelFileError, match=r"model was trained on observation space .+, env has .+"):
        load_model(path, env)
    env.close()
    proc = subprocess.run([sys.executable, "-m", "run", f"--env=envs:{other}", "--num_timesteps=0",
                           f"--load_path={path}", "--play", "--play_episodes=1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 2  # no --alg: the file's algorithm is used, and its spaces do not fit
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("run: error:")]
    assert len(errors) == 1 and "model was trained on" in errors[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_play_from_the_file_works(trained):
    case, _, env_id, path = trained
    proc = subprocess.run([sys.executable, "-m", "run", f"--alg={case.partition(':')[0]}", f"--env=envs:{env_id}",
                           "--num_timesteps=0", f"--load_path={path}", "--play", "--play_episodes=2",
                           "--no_render"], cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "played 2 episodes" in proc.stdout


def test_every_algorithm_declares_its_capabilities_once():
    from algos.base import algorithm_names
    from algos.capabilities import ALL_ACTION_SPACES, CAPABILITIES

    assert sorted(CAPABILITIES) == algorithm_names()
    for alg, caps in CAPABILITIES.items():
        assert caps.action_spaces and set(caps.action_spaces) <= set(ALL_ACTION_SPACES), alg

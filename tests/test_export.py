"""python -m export: the exported function of every algorithm, in every format, gives the model's
deterministic actions on raw observations (VecNormalize, encoding and action bounds inside); it runs
in a process that does not import this project; user mistakes are one line and exit 2."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
import zipfile

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
from gymnasium import spaces

import export
from algos.base import Model, algorithm_module, algorithm_names, load_model
from common.errors import ConfigError, UserError
from common.nn.obs_encoding import ObsEncoder
from common.nn.policy_export import input_arrays, tf_encoder
from common.vec_env import DummyVecEnv, VecNormalize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = ("saved_model", "tflite", "onnx")
OUT_NAMES = {"saved_model": "policy", "tflite": "policy.tflite", "onnx": "policy.onnx"}
# tried in this order: the first one an algorithm's model accepts (Discrete with a start, asymmetric Box)
ACTION_SPACES = (spaces.Discrete(3, start=2), spaces.Box(np.array([-1.0, 0.0]), np.array([2.0, 5.0]), dtype=np.float32))
N_OBS = 1000


class _SpacesEnv(gym.Env):
    """An env that only has spaces (for VecNormalize around the model's observation space)."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space):
        self.observation_space, self.action_space = observation_space, action_space

    def reset(self, *, seed=None, options=None):
        return self.observation_space.sample(), {}


def _model(alg: str, observation_space: spaces.Space, action_spaces=ACTION_SPACES, network: str = "mlp",
           **network_kwargs):
    """A seeded ``alg`` model with the first action space it accepts, its weights moved off their
    initial values (so actions and values vary with the observation)."""
    cls = algorithm_module(alg).load.model_class
    for action_space in action_spaces:
        try:
            model = cls(observation_space, action_space, network=network,
                        network_kwargs=network_kwargs or {"num_hidden": 16}, seed=0)
        except (ConfigError, AttributeError, TypeError):
            continue
        rng = np.random.default_rng(1)
        for v in model.policy_graph().variables:
            if v.trainable:
                v.assign(v + rng.normal(0.0, 0.5, v.shape).astype(v.dtype.as_numpy_dtype))
        model.set_arrays(model.get_arrays())  # refresh the numpy copies predict acts with
        return model
    pytest.fail(f"{alg} accepts none of {action_spaces}")


def _vec_normalize(observation_space: spaces.Space, seed: int = 2) -> VecNormalize:
    """A frozen VecNormalize with random statistics (clip 2, so some observations are clipped)."""
    vn = VecNormalize(DummyVecEnv([lambda: _SpacesEnv(observation_space, spaces.Discrete(2))]), training=False,
                      clip_obs=2.0)
    rng = np.random.default_rng(seed)
    for rms in (vn.obs_rms.values() if isinstance(vn.obs_rms, dict) else [vn.obs_rms]):
        rms.mean = rng.normal(0.0, 0.5, rms.mean.shape)
        rms.var = rng.uniform(0.05, 2.0, rms.var.shape)
    return vn


def _sample(space: spaces.Space, n: int, seed: int = 3):
    """``n`` observations from ``space`` batched as a vec env gives them."""
    space.seed(seed)
    items = [space.sample() for _ in range(n)]
    if isinstance(space, spaces.Dict):
        return {k: np.stack([o[k] for o in items]) for k in space.spaces}
    return np.stack([np.asarray(o) for o in items])


def _export(model, fmt: str, folder, extra_outputs: bool = False) -> str:
    """Save ``model``, export the file with the command line's code, return the artifact's path."""
    path = str(folder / "model.zip")
    model.save(path)
    out = str(folder / OUT_NAMES[fmt])
    export.main([path, f"--format={fmt}", f"--out={out}"] + (["--extra_outputs"] if extra_outputs else []))
    return out


def _runner(fmt: str, path: str):
    """``run(feed) -> outputs`` with the artifact's own runtime (feed: input name -> array)."""
    if fmt == "saved_model":
        fn = tf.saved_model.load(path).signatures["serving_default"]
        return lambda feed: {k: v.numpy() for k, v in fn(**{n: tf.constant(a) for n, a in feed.items()}).items()}
    if fmt == "tflite":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runner = tf.lite.Interpreter(model_path=path).get_signature_runner()
        return lambda feed: runner(**feed)
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return lambda feed: dict(zip(names, session.run(None, feed)))


def _assert_actions_equal(got: np.ndarray, want: np.ndarray, action_space: spaces.Space) -> None:
    assert got.shape == want.shape and got.dtype == np.dtype(action_space.dtype)
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)
    assert all(action_space.contains(a) for a in got[:50])


# --------------------------------------------------------------------------- every algorithm, every format


@pytest.fixture(scope="module", params=algorithm_names())
def algorithm_model(request):
    """(model, frozen VecNormalize saved with it) for each algorithm on a Box observation space."""
    observation_space = spaces.Box(-3.0, 3.0, (3,), dtype=np.float32)
    model = _model(request.param, observation_space)
    vn = _vec_normalize(observation_space)
    model.vec_normalize_state = vn.get_state()
    return model, vn


@pytest.mark.parametrize("fmt", FORMATS)
def test_exported_actions_equal_predict(algorithm_model, fmt, tmp_path):
    """1,000 sampled raw observations: the artifact's actions are predict's on the VecNormalize'd ones
    (exactly for discrete actions, within 1e-5 for continuous ones)."""
    model, vn = algorithm_model
    out = _export(model, fmt, tmp_path, extra_outputs=True)
    obs = _sample(model.observation_space, N_OBS)
    want = model.predict(vn.normalize_obs(obs), deterministic=True)[0]
    got = _runner(fmt, out)(input_arrays(model.observation_space, obs))
    _assert_actions_equal(got["action"], want, model.action_space)
    assert set(got) - {"action"} and set(got) <= {"action", "value", "probs", "q_values"}
    if "value" in got and hasattr(model, "value"):
        np.testing.assert_allclose(got["value"], model.value(vn.normalize_obs(obs)), rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- preprocessing and action spaces


PPO2_CASES = {
    # Dict observation (Discrete + Box parts), Box actions partly outside narrow bounds: clipped
    "dict_obs_box_clip": (spaces.Dict({"target": spaces.Discrete(3, start=-1), "noise": spaces.Box(-1, 1, (2,))}),
                          spaces.Box(-0.3, 0.4, (2,), dtype=np.float32), "mlp", {}),
    # Dict of Boxes with VecNormalize statistics per key, MultiDiscrete actions with a start
    "dict_vecnormalize_multidiscrete": (spaces.Dict({"a": spaces.Box(-2, 2, (3,)), "b": spaces.Box(0, 5, (2,))}),
                                        spaces.MultiDiscrete([3, 2], start=[1, -1]), "mlp", {}),
    # uint8 images scaled by 1/255 in the graph, MultiBinary actions
    "image_multibinary": (spaces.Box(0, 255, (24, 24, 2), dtype=np.uint8), spaces.MultiBinary(3), "cnn_small",
                          {"num_hidden": 16}),
    # MultiDiscrete and MultiBinary observations
    "multidiscrete_obs": (spaces.Tuple((spaces.MultiDiscrete([3, 4]), spaces.MultiBinary(2))), spaces.Discrete(4),
                          "mlp", {}),
}


@pytest.mark.parametrize("case", sorted(PPO2_CASES))
def test_preprocessing_is_inside_the_exported_function(case, tmp_path):
    """ppo2 on other spaces, in TFLite (the format with the fewest ops): same actions as predict."""
    obs_space, action_space, network, kwargs = PPO2_CASES[case]
    model = _model("ppo2", obs_space, (action_space,), network, **kwargs)
    vn = None
    if case.startswith("dict_vecnormalize"):
        vn = _vec_normalize(obs_space)
        model.vec_normalize_state = vn.get_state()
    out = _export(model, "tflite", tmp_path)
    obs = _sample(model.observation_space, 300)
    want = model.predict(vn.normalize_obs(obs) if vn else obs, deterministic=True)[0]
    got = _runner("tflite", out)(input_arrays(model.observation_space, obs))
    _assert_actions_equal(got["action"], want, model.action_space)
    if case == "dict_obs_box_clip":
        assert np.any(want == np.float32(0.4)) and np.any(want == np.float32(-0.3))  # clipping happened


@pytest.mark.parametrize("space", [
    spaces.Discrete(4, start=3),
    spaces.MultiDiscrete([[2, 3], [4, 2]]),
    spaces.MultiBinary([2, 3]),
    spaces.Box(0, 255, (6, 5, 2), dtype=np.uint8),
    spaces.Box(-1, 1, (2, 3), dtype=np.float64),
    spaces.Dict({"x": spaces.Discrete(3), "y": spaces.Dict({"z": spaces.Box(-1, 1, (2, 2))}),
                 "w": spaces.Tuple((spaces.MultiBinary(3), spaces.Discrete(2, start=5)))}),
], ids=lambda s: type(s).__name__)
def test_tf_encoder_equals_obs_encoder(space):
    obs = _sample(space, 20) if not isinstance(space, spaces.Dict) else _sample_nested(space, 20)
    want = ObsEncoder(space)(obs)
    feed = {k: tf.constant(v) for k, v in input_arrays(space, obs).items()}
    got = tf_encoder(space)(feed).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def _sample_nested(space: spaces.Space, n: int):
    if isinstance(space, spaces.Dict):
        return {k: _sample_nested(s, n) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_sample_nested(s, n) for s in space.spaces)
    return _sample(space, n)


# --------------------------------------------------------------------------- recurrent policies


@pytest.mark.parametrize("fmt", FORMATS)
def test_lstm_step_function_carries_state_over_an_episode(fmt, tmp_path, monitored_venv):
    """A 200-step episode of 2 envs: the exported step function, fed its own next_state, gives
    predict's actions (with predict's state carried) at every step, and the same final state."""
    env = monitored_venv("IdentityDiscrete-v0", 2, seed=0, max_episode_steps=200)
    model = _model("ppo2", env.observation_space, (env.action_space,), "lstm", nlstm=8)
    run = _runner(fmt, _export(model, fmt, tmp_path))
    obs, state, exported_state = env.reset(), model.initial_state(2), np.zeros((2, 16), np.float32)
    assert model.policy_graph().state_size == 16
    for step in range(200):
        want, state = model.predict(obs, state, np.full(2, step == 0), deterministic=True)
        out = run(input_arrays(env.observation_space, obs, exported_state))
        np.testing.assert_array_equal(out["action"], want, err_msg=f"step {step}")
        exported_state = out["next_state"]
        obs, _, dones, _ = env.step(want)
        assert not dones.any() or step == 199
    np.testing.assert_allclose(exported_state, state, rtol=1e-5, atol=1e-5)
    assert np.abs(state).max() > 0.1  # the state carried information
    env.close()


# --------------------------------------------------------------------------- a fresh process


ONNX_ONLY = """
import json, sys
import numpy as np, onnxruntime
obs = np.load("obs.npy")
session = onnxruntime.InferenceSession("policy.onnx")
action = session.run(["action"], {"obs": obs})[0]
print(json.dumps({"action": action.tolist(), "modules": sorted(m for m in ("tensorflow", "algos", "common")
                                                                  if m in sys.modules)}))
"""
TF_ONLY = """
import json, sys
import numpy as np, tensorflow as tf
obs = np.load("obs.npy")
policy = tf.saved_model.load("policy")
saved = policy.signatures["serving_default"](obs=tf.constant(obs))["action"].numpy()
interpreter = tf.lite.Interpreter(model_path="policy.tflite")
lite = interpreter.get_signature_runner()(obs=obs)["action"]
print(json.dumps({"saved_model": saved.tolist(), "tflite": lite.tolist(),
                  "modules": sorted(m for m in ("algos", "common") if m in sys.modules)}))
"""


def test_artifacts_run_in_a_fresh_process_without_this_project(tmp_path):
    """``python -I`` in another folder (this project is not importable): onnxruntime alone for the ONNX
    file, TensorFlow alone for the SavedModel and the TFLite file; actions are predict's."""
    model = _model("ppo2", spaces.Box(-2.0, 2.0, (4,), dtype=np.float32), (spaces.Discrete(2),))
    for fmt in FORMATS:
        _export(model, fmt, tmp_path)
    obs = _sample(model.observation_space, 100)
    np.save(tmp_path / "obs.npy", obs)
    want = model.predict(obs, deterministic=True)[0].tolist()
    for script, keys in ((ONNX_ONLY, ("action",)), (TF_ONLY, ("saved_model", "tflite"))):
        proc = subprocess.run([sys.executable, "-I", "-c", textwrap.dedent(script)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["modules"] == []
        for key in keys:
            assert result[key] == want


# --------------------------------------------------------------------------- user mistakes


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "export", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module")
def saved_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    model = _model("deepq", spaces.Box(-1.0, 1.0, (2,), dtype=np.float32), (spaces.Discrete(2),))
    model.save(str(folder / "model.zip"))
    return folder


def _bad_inputs(folder) -> dict[str, tuple[list[str], str]]:
    model = str(folder / "model.zip")
    (folder / "corrupt.zip").write_bytes(b"PK\x03\x04 not really a zip")
    (folder / "foreign.json").write_text('{"weights": [1, 2, 3]}')
    (folder / "a_file").write_text("x")
    with zipfile.ZipFile(folder / "sb3.zip", "w") as zf:  # another library's model archive
        zf.writestr("data", "{}")
    with zipfile.ZipFile(folder / "other_alg.zip", "w") as zf:
        zf.writestr("metadata.json", json.dumps({"algorithm": "muzero", "format_version": 1}))
    return {
        "unknown format": ([model, "--format=pb", f"--out={folder / 'x'}"], "unknown format 'pb'"),
        "unwritable path": ([model, "--format=onnx", f"--out={folder / 'a_file' / 'policy.onnx'}"], "cannot write"),
        "saved_model onto a file": ([model, "--format=saved_model", f"--out={folder / 'a_file'}"], "is a file"),
        "corrupt model file": ([str(folder / "corrupt.zip"), "--format=onnx", f"--out={folder / 'y.onnx'}"],
                               "not a readable model file"),
        "foreign file": ([str(folder / "foreign.json"), "--format=tflite", f"--out={folder / 'y.tflite'}"],
                         "not a readable model file"),
        "another library's archive": ([str(folder / "sb3.zip"), "--format=onnx", f"--out={folder / 'y.onnx'}"],
                                      "is not a model file"),
        "unknown algorithm": ([str(folder / "other_alg.zip"), "--format=onnx", f"--out={folder / 'y.onnx'}"],
                              "which this project does not have"),
        "missing model file": ([str(folder / "nothing.zip"), "--format=onnx", f"--out={folder / 'y.onnx'}"],
                               "no such model file"),
        "missing --out": ([model, "--format=onnx"], "--out"),
    }


def test_user_mistakes_are_one_line_and_exit_2(saved_file):
    for name, (args, message) in _bad_inputs(saved_file).items():
        proc = _cli(*args)
        assert proc.returncode == 2, (name, proc.stderr[-2000:])
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("export: error:") and message in lines[0], (name, lines)
    assert not list(saved_file.glob("y.*")) and not (saved_file / "x").exists()


def test_missing_onnx_packages_name_the_install_line(saved_file, monkeypatch):
    monkeypatch.setitem(sys.modules, "tf2onnx", None)  # import tf2onnx now raises ImportError
    with pytest.raises(UserError, match=r"pip install -r requirements-export.txt"):
        export.main([str(saved_file / "model.zip"), "--format=onnx", f"--out={saved_file / 'z.onnx'}"])
    assert not (saved_file / "z.onnx").exists()


def test_command_line_writes_and_reports(saved_file, monkeypatch, capsys):
    """The command line's own path (in this process: the subprocess runs above cover ``-m export``)."""
    out = saved_file / "ok.tflite"
    monkeypatch.setattr(sys, "argv", ["export", str(saved_file / "model.zip"), "--format=tflite", f"--out={out}"])
    assert export.main() == 0
    printed = capsys.readouterr().out
    assert f"deepq policy written to {out} (tflite, {out.stat().st_size} bytes); inputs obs; outputs action" in printed
    monkeypatch.setattr(sys, "argv", ["export", str(saved_file / "model.zip"), "--format=onnx", f"--out={out}/x"])
    assert export.main() == 2
    assert capsys.readouterr().err.startswith("export: error: --out")


def test_an_algorithm_without_policy_graph_is_refused(saved_file):
    model = load_model(str(saved_file / "model.zip"))
    model.policy_graph = lambda: Model.policy_graph(model)
    with pytest.raises(UserError, match=r"^deepq models cannot be exported yet"):
        export.export_model(model, "onnx", str(saved_file / "never.onnx"))


def test_saved_model_replaces_only_a_saved_model_folder(saved_file):
    model = load_model(str(saved_file / "model.zip"))
    busy = saved_file / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("keep me")
    with pytest.raises(UserError, match=r"exists and is neither empty nor a SavedModel folder"):
        export.export_model(model, "saved_model", str(busy))
    assert (busy / "notes.txt").read_text() == "keep me"
    target = saved_file / "again"
    for _ in range(2):  # the second export replaces the first
        export.export_model(model, "saved_model", str(target))
    assert (target / "saved_model.pb").is_file() and not list(saved_file.glob(".tmp-export-*"))


@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_a_bfloat16_network_exports_computing_in_float32(fmt, tmp_path):
    """TFLite and ONNX runtimes lack bfloat16 convolutions: the export computes the float32 weights in
    float32, and its actions are predict's with the model switched to float32 compute."""
    from common.nn.networks import use_float32_compute

    obs_space = spaces.Box(0, 255, (24, 24, 2), dtype=np.uint8)
    model = _model("ppo2", obs_space, (spaces.Discrete(5),), "cnn_small", num_hidden=16, compute_dtype="bfloat16")
    out = _export(model, fmt, tmp_path)
    obs = _sample(model.observation_space, 300)
    assert use_float32_compute(model) == 1  # the policy's network was bfloat16 until now
    want = model.predict(obs, deterministic=True)[0]
    got = _runner(fmt, out)(input_arrays(model.observation_space, obs))
    _assert_actions_equal(got["action"], want, model.action_space)

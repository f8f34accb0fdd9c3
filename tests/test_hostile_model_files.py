"""Crafted model files: nothing read from a file runs code, allocates without bound, or gives a traceback."""
import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from gymnasium import spaces

from algos.ddpg import ddpg
from algos.deepq import deepq
from algos.ppo2 import ppo2
from common.files.checkpoint import (
    CheckpointError,
    open_checkpoint,
    read_state,
    write_checkpoint,
)
from common.files.model_file import ModelFileError
from common.files.space_json import space_from_json, space_to_json
from common.vec_env import DummyVecEnv
from envs.identity import IdentityDiscreteEnv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOADERS = {"ppo2": ppo2.load, "deepq": deepq.load, "ddpg": ddpg.load}


def _saved_model(alg: str, tmp_path) -> str:
    """A real, tiny model file of ``alg`` (built, not trained)."""
    path = str(tmp_path / f"{alg}.zip")
    if alg == "ddpg":
        from algos.ddpg.model import DDPGModel

        model = DDPGModel(spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-1, 1, (2,), np.float32),
                          network="mlp", network_kwargs={"num_hidden": 16}, seed=0)
        model.vec_normalize = None
    else:
        env = DummyVecEnv([lambda: IdentityDiscreteEnv(4)])
        learn = ppo2.learn if alg == "ppo2" else deepq.learn
        model = learn(env=env, total_timesteps=0, seed=0, num_hidden=16)
        env.close()
    model.save(path)
    return path


def _rewrite(path: str, out: str, edit_meta=None, extra_members: dict[str, bytes] | None = None) -> str:
    """Copy model file ``path`` to ``out`` with its metadata edited and members added."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    meta = json.loads(members["metadata.json"])
    if edit_meta is not None:
        meta = edit_meta(meta)
    members["metadata.json"] = json.dumps(meta).encode()
    members.update(extra_members or {})
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out


@pytest.mark.parametrize("alg", sorted(LOADERS))
def test_file_naming_an_importable_function_as_network_runs_nothing(alg, tmp_path):
    marker = tmp_path / "pwned"
    path = _rewrite(_saved_model(alg, tmp_path), str(tmp_path / "evil.zip"), edit_meta=lambda m: {
        **m, "network": "subprocess:getoutput", "network_kwargs": {"cmd": f"touch {marker}"}})
    with pytest.raises(ModelFileError, match="not one of this project's networks"):
        LOADERS[alg](path)
    assert not marker.exists()


def test_command_line_refuses_the_crafted_file_in_one_line(tmp_path):
    marker = tmp_path / "pwned"
    path = _rewrite(_saved_model("ppo2", tmp_path), str(tmp_path / "evil.zip"), edit_meta=lambda m: {
        **m, "network": "os:system", "network_kwargs": {"command": f"touch {marker}"}})
    proc = subprocess.run([sys.executable, "-m", "run", "--alg=ppo2", "--env=envs:IdentityDiscrete-v0",
                           "--num_timesteps=0", f"--load_path={path}", "--log_path", str(tmp_path / "log")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("run: error:")]
    assert len(errors) == 1 and "not one of this project's networks" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not marker.exists()


def test_users_own_network_loads_when_named_on_the_command_line(tmp_path):
    path = _rewrite(_saved_model("ppo2", tmp_path), str(tmp_path / "own.zip"),
                    edit_meta=lambda m: {**m, "network": "common.nn.models:mlp"})
    with pytest.raises(ModelFileError, match="name it on the command line"):
        ppo2.load(path)
    model = ppo2.load(path, network="common.nn.models:mlp")
    assert model.predict(np.array([2]))[0].shape == (1,)
    with pytest.raises(ModelFileError, match="was trained with network"):
        ppo2.load(path, network="cnn_small")


def test_unused_array_bomb_is_never_decompressed(tmp_path):
    """A 1 GiB array member that the model does not use: loading reads only the model's arrays."""
    bomb = io.BytesIO()
    np.lib.format.write_array_header_1_0(bomb, {"descr": "<f4", "fortran_order": False, "shape": (2**28,)})
    bomb.write(bytes(2**28 * 4))
    path = _rewrite(_saved_model("ppo2", tmp_path), str(tmp_path / "bomb.zip"),
                    extra_members={"unused.npy": bomb.getvalue()})
    assert os.path.getsize(path) < 4 * 2**20
    code = ("import resource, sys; from algos.ppo2 import ppo2; ppo2.load(sys.argv[1]); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    before = subprocess.run([sys.executable, "-c", code, _saved_model("ppo2", tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=True)
    after = subprocess.run([sys.executable, "-c", code, path], cwd=ROOT, capture_output=True, text=True,
                           timeout=120, check=True)
    grew_kib = int(after.stdout.split()[-1]) - int(before.stdout.split()[-1])
    assert grew_kib < 100 * 1024, f"peak memory grew by {grew_kib} KiB"


def test_array_of_another_shape_than_the_model_is_refused_before_reading(tmp_path):
    path = _saved_model("deepq", tmp_path)
    with zipfile.ZipFile(path) as zf:
        name = next(n for n in zf.namelist() if n.startswith("q/"))
    big = io.BytesIO()
    np.lib.format.write_array(big, np.zeros((2**20,), np.float32))
    bad = _rewrite(path, str(tmp_path / "shape.zip"), extra_members={name: big.getvalue()})
    with pytest.raises(ModelFileError, match="has shape .* the model needs"):
        deepq.load(bad)


@pytest.mark.parametrize("edit, message", [
    (lambda m: {**m, "network_kwargs": {"num_hidden": 10**7}}, "asks for size 10000000"),
    (lambda m: {**m, "network_kwargs": {"num_hidden": [10**6, 10**6]}}, "asks for size 1000000"),
    (lambda m: {**m, "observation_space": {"type": "Box", "shape": [10**12], "dtype": "float32", "low": 0,
                                           "high": 1}}, "more than"),
    (lambda m: {**m, "action_space": {"type": "Discrete", "n": 10**12}}, "size 1000000000000 is not in"),
    (lambda m: {**m, "observation_space": {"type": "Box"}}, "malformed space"),
    (lambda m: {k: v for k, v in m.items() if k != "network"}, "'network' is missing"),
    (lambda m: {k: v for k, v in m.items() if k != "observation_space"}, "'observation_space' is missing"),
    (lambda m: {**m, "network_kwargs": "mlp"}, "'network_kwargs' is missing or not a dict"),
    (lambda m: {**m, "hyperparameters": [1, 2]}, "'hyperparameters' has the wrong type"),
    (lambda m: {**m, "vec_normalize": "x"}, "'vec_normalize' is not an object"),
    (lambda m: {**m, "hyperparameters": {**m["hyperparameters"], "value_network": 3}},
     "value_network must be None"),
], ids=["hidden-1e7", "hidden-list", "box-1e12", "discrete-1e12", "box-no-fields", "no-network",
        "no-obs-space", "kwargs-string", "hyper-list", "vecnorm-string", "value-network-int"])
def test_malformed_metadata_is_one_model_file_error(edit, message, tmp_path):
    path = _rewrite(_saved_model("ppo2", tmp_path), str(tmp_path / "bad.zip"), edit_meta=edit)
    with pytest.raises(ModelFileError, match=message):
        ppo2.load(path)


@pytest.mark.parametrize("text", [b"[1, 2]", b'"a string"', b"[" * 100_000 + b"]" * 100_000, b"{not json"],
                         ids=["list", "string", "deep", "not-json"])
def test_metadata_that_is_not_an_object_is_refused(text, tmp_path):
    path = _rewrite(_saved_model("ppo2", tmp_path), str(tmp_path / "bad.zip"),
                    extra_members={"metadata.json": text})
    with pytest.raises(ModelFileError):
        ppo2.load(path)


def test_deepq_head_sizes_must_be_backed_by_arrays(tmp_path):
    path = _rewrite(_saved_model("deepq", tmp_path), str(tmp_path / "head.zip"),
                    edit_meta=lambda m: {**m, "hyperparameters": {**m["hyperparameters"], "hiddens": [10**8]}})
    with pytest.raises(ModelFileError, match="asks for size 100000000"):
        deepq.load(path)


def test_ddpg_hyperparameter_of_wrong_type_is_refused(tmp_path):
    path = _rewrite(_saved_model("ddpg", tmp_path), str(tmp_path / "hp.zip"),
                    edit_meta=lambda m: {**m, "hyperparameters": {**m["hyperparameters"], "gamma": "0.9; rm -rf"}})
    with pytest.raises(ModelFileError, match="'gamma' has the wrong type"):
        ddpg.load(path)


@pytest.mark.parametrize("value, refused", [("lin_1e-3", False), ("lin_1e-3; import os", True), ("nan", True)])
def test_ddpg_learning_rate_schedule_strings_are_parsed_as_numbers_only(value, refused, tmp_path):
    path = _rewrite(_saved_model("ddpg", tmp_path), str(tmp_path / "lr.zip"),
                    edit_meta=lambda m: {**m, "hyperparameters": {**m["hyperparameters"], "actor_lr": value}})
    if refused:
        with pytest.raises(ModelFileError, match="'actor_lr' has the wrong type"):
            ddpg.load(path)
    else:
        assert ddpg.load(path).actor_lr.numpy() == pytest.approx(1e-3)


def test_space_from_json_round_trips_and_bounds_sizes():
    box = spaces.Box(-1, 1, (3,), np.float32)
    assert space_from_json(space_to_json(box)) == box
    with pytest.raises(ModelFileError):
        space_from_json({"type": "Box", "shape": [4], "dtype": "object", "low": 0, "high": 1})


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=False)
    return buf.getvalue()


def _float_member(path: str) -> tuple[str, np.ndarray]:
    """The name and array of the model file's first float32 member."""
    with zipfile.ZipFile(path) as zf:
        for name in sorted(zf.namelist()):
            if name.endswith(".npy"):
                array = np.lib.format.read_array(io.BytesIO(zf.read(name)))
                if array.dtype == np.float32 and array.size > 1:
                    return name, array
    raise AssertionError("no float32 array")


BIG_BOX = {"type": "Box", "shape": [4096, 4096], "dtype": "float64", "low": 0, "high": 1}
CRAFTED_SPACES = {
    "dict-of-40-big-boxes": ("observation_space", {"type": "Dict", "spaces": {f"k{i}": BIG_BOX for i in range(40)}},
                             "elements in all, more than 16777216"),
    "discrete-2**24": ("action_space", {"type": "Discrete", "n": 2**24}, "a layer 16777216 wide"),
    "box-64x64x64x64": ("observation_space", {"type": "Box", "shape": [64] * 4, "dtype": "float32", "low": 0,
                                              "high": 1}, "a layer 16777216 wide"),
    "multidiscrete-wide": ("observation_space", {"type": "MultiDiscrete", "nvec": [2**20] * 8, "dtype": "int64",
                                                 "start": [0] * 8}, "a layer 8388608 wide"),
    "big-image": ("observation_space", {"type": "Box", "shape": [4096, 4096, 1], "dtype": "uint8", "low": 0,
                                        "high": 255}, "more than all the file's arrays"),
    "tuple-of-2000": ("observation_space", {"type": "Tuple", "spaces": [{"type": "Discrete", "n": 2}] * 2000},
                      "more than 1024 parts"),
    "box-complex": ("observation_space", {"type": "Box", "shape": [2], "dtype": "complex64", "low": 0, "high": 1},
                    "Box dtype 'complex64'"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED_SPACES))
def test_oversized_spaces_are_refused_from_the_json_before_building(case, tmp_path):
    key, space, message = CRAFTED_SPACES[case]
    path = _rewrite(_saved_model("ppo2", tmp_path), str(tmp_path / "big.zip"), edit_meta=lambda m: {**m, key: space})
    env = DummyVecEnv([lambda: IdentityDiscreteEnv(4)])
    for given in (None, env):  # loading alone (export), and with the env (--play, evaluation)
        with pytest.raises(ModelFileError, match=message):
            ppo2.load(path, env=given)
    with pytest.raises(ModelFileError, match=message):  # continued training
        ppo2.learn(env=env, total_timesteps=0, seed=0, num_hidden=16, load_path=path)
    env.close()


def test_crafted_spaces_cost_no_memory(tmp_path):
    """Every crafted space file is refused in one process whose peak memory grows by less than 100 MiB."""
    good = _saved_model("ppo2", tmp_path)
    paths = [_rewrite(good, str(tmp_path / f"{case}.zip"), edit_meta=lambda m, k=key, s=space: {**m, k: s})
             for case, (key, space, _) in CRAFTED_SPACES.items()]
    code = ("import resource, sys; from algos.ppo2 import ppo2; from common.files.model_file import ModelFileError\n"
            "ppo2.load(sys.argv[1]); before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "for path in sys.argv[2:]:\n"
            "    try: ppo2.load(path)\n"
            "    except ModelFileError: pass\n"
            "    else: raise SystemExit(path + ' loaded')\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)")
    proc = subprocess.run([sys.executable, "-c", code, good, *paths], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.split()[-1]) < 100 * 1024, f"peak memory grew by {proc.stdout.split()[-1]} KiB"


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_weights_are_refused_naming_the_array(value, tmp_path):
    path = _saved_model("ppo2", tmp_path)
    name, array = _float_member(path)
    array.flat[1] = value
    bad = _rewrite(path, str(tmp_path / "nan.zip"), extra_members={name: _npy(array)})
    message = f"nan.zip'. array '{name[:-4]}' holds NaN or infinity"
    with pytest.raises(ModelFileError, match=message):
        ppo2.load(bad)
    env = DummyVecEnv([lambda: IdentityDiscreteEnv(4)])
    with pytest.raises(ModelFileError, match=message):  # continued training: not "training diverged"
        ppo2.learn(env=env, total_timesteps=0, seed=0, num_hidden=16, load_path=bad)
    env.close()


@pytest.mark.parametrize("dtype", ["complex64", ">f4", "datetime64[s]", "<U2", [("a", "<f4")]],
                         ids=["complex", "big-endian", "datetime", "str", "struct"])
def test_arrays_of_other_than_plain_numeric_dtypes_are_refused(dtype, tmp_path):
    path = _saved_model("ppo2", tmp_path)
    name, array = _float_member(path)
    bad = _rewrite(path, str(tmp_path / "dtype.zip"), extra_members={name: _npy(np.zeros(array.shape, dtype))})
    with pytest.raises(ModelFileError, match=f"array '{name[:-4]}' has dtype"):
        ppo2.load(bad)


def test_array_header_larger_than_its_stored_bytes_is_refused(tmp_path):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (2**24, 64)})
    path = _rewrite(_saved_model("ppo2", tmp_path), str(tmp_path / "fake.zip"),
                    extra_members={"fake.npy": header.getvalue()})
    with pytest.raises(ModelFileError, match=r"'fake.npy' declares shape \(16777216, 64\) .* more than its"):
        ppo2.load(path)


@pytest.mark.parametrize("edit, message", [
    (lambda m: {**m, "format_version": True}, "model format version True"),
    (lambda m: {**m, "format_version": 0}, "model format version 0"),
    (lambda m: {**m, "num_timesteps": "5"}, "'num_timesteps' has the wrong type"),
    (lambda m: {**m, "num_timesteps": -1}, "'num_timesteps' is negative"),
], ids=["version-true", "version-0", "steps-string", "steps-negative"])
def test_metadata_fields_of_wrong_json_types_are_refused(edit, message, tmp_path):
    path = _rewrite(_saved_model("ppo2", tmp_path), str(tmp_path / "bad.zip"), edit_meta=edit)
    with pytest.raises(ModelFileError, match=message):
        ppo2.load(path)


def test_checkpoint_with_non_finite_weights_or_a_bad_step_is_refused(tmp_path):
    path = str(tmp_path / "0000000007-rank0.zip")
    write_checkpoint(path, {"algorithm": "test", "step": 7}, {"w": np.array([1.0, np.nan], np.float32)}, {})
    with pytest.raises(CheckpointError, match="array 'w' holds NaN or infinity"):
        read_state(open_checkpoint(path), {"w": np.zeros(2, np.float32)}, {})
    write_checkpoint(path, {"algorithm": "test", "step": True}, {"w": np.zeros(2, np.float32)}, {})
    with pytest.raises(CheckpointError, match="has step True, not a whole number"):
        open_checkpoint(path)


@pytest.mark.parametrize("case", ["discrete-2**24", "box-64x64x64x64", "nan"])
def test_export_refuses_crafted_files_in_one_line(case, tmp_path, monkeypatch, capsys):
    import export

    path = _saved_model("ppo2", tmp_path)
    if case == "nan":
        name, array = _float_member(path)
        array.flat[0] = np.nan
        bad, message = _rewrite(path, str(tmp_path / "bad.zip"), extra_members={name: _npy(array)}), "holds NaN"
    else:
        key, space, message = CRAFTED_SPACES[case]
        bad = _rewrite(path, str(tmp_path / "bad.zip"), edit_meta=lambda m: {**m, key: space})
    monkeypatch.setattr(sys, "argv", ["export", bad, "--format=onnx", f"--out={tmp_path / 'policy.onnx'}"])
    assert export.main() == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("export: error: ") and message in lines[0], lines
    assert not (tmp_path / "policy.onnx").exists()

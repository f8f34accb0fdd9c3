import os
import zipfile

import numpy as np
import pytest
from gymnasium import spaces

from common.files.model_file import ModelFileError, load_model_file, save_model_file
from common.files.space_json import (
    check_spaces,
    space_from_json,
    space_size,
    space_to_json,
)
from common.nn.obs_encoding import ObsEncoder

SPACES = [
    spaces.Discrete(5, start=1),
    spaces.Box(-1.0, 1.0, (3,), np.float32),
    spaces.Box(np.array([-np.inf, 0.0]), np.array([np.inf, 2.0]), dtype=np.float64),
    spaces.Box(0, 255, (8, 8, 3), np.uint8),
    spaces.MultiDiscrete([2, 3]),
    spaces.MultiBinary(4),
    spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Box(-1, 1, (2,), np.float32)}),
    spaces.Tuple([spaces.Discrete(2), spaces.Discrete(3)]),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_space_roundtrip(space):
    d = space_to_json(space)
    import json

    assert space_from_json(json.loads(json.dumps(d))) == space


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_space_size_gives_the_encoding_width_without_building(space, monkeypatch):
    d = space_to_json(space)
    monkeypatch.setattr(spaces.Space, "__init__", _never_built)
    assert space_size(d).width == ObsEncoder._flat_size(space)


def _never_built(*args, **kwargs):
    raise AssertionError("a space was built")


def test_save_load_roundtrip_and_plain_numpy_opens_it(tmp_path):
    path = str(tmp_path / "m.zip")
    arrays = {"pi/w": np.arange(6, dtype=np.float32).reshape(2, 3), "t": np.asarray(3.0)}
    save_model_file(path, {"algorithm": "x", "n": 1}, arrays)
    meta, loaded = load_model_file(path)
    assert meta["algorithm"] == "x" and meta["format_version"] == 1
    np.testing.assert_array_equal(loaded["pi/w"], arrays["pi/w"])
    with np.load(path, allow_pickle=False) as npz:
        np.testing.assert_array_equal(npz["pi/w"], arrays["pi/w"])
    assert [f for f in os.listdir(tmp_path)] == ["m.zip"]  # no temporary left behind


def test_object_arrays_are_refused_and_nothing_is_left(tmp_path):
    path = str(tmp_path / "m.zip")
    with pytest.raises(ValueError):
        save_model_file(path, {}, {"bad": np.array([{"a": 1}], dtype=object)})
    assert os.listdir(tmp_path) == []


def test_bad_files_raise_model_file_error(tmp_path):
    with pytest.raises(ModelFileError, match="does not exist"):
        load_model_file(str(tmp_path / "missing.zip"))
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ModelFileError, match="not a readable model file"):
        load_model_file(str(junk))
    nometa = tmp_path / "nometa.zip"
    with zipfile.ZipFile(nometa, "w") as zf:
        zf.writestr("x.npy", b"")
    with pytest.raises(ModelFileError, match="not a model file"):
        load_model_file(str(nometa))


def test_check_spaces_message():
    class Env:
        observation_space = spaces.Box(-1, 1, (4,), np.float32)
        action_space = spaces.Discrete(2)

    meta = {"observation_space": space_to_json(Env.observation_space), "action_space": space_to_json(spaces.Discrete(2))}
    check_spaces(meta, Env)
    meta["observation_space"] = space_to_json(spaces.Box(-1, 1, (3,), np.float32))
    with pytest.raises(ModelFileError, match="model was trained on observation space Box.*env has Box"):
        check_spaces(meta, Env)


def test_check_spaces_describes_the_files_space_from_its_json(monkeypatch):
    class Env:
        observation_space = spaces.Box(-1, 1, (4,), np.float32)
        action_space = spaces.Discrete(2)

    big = {"type": "Box", "shape": [4096, 4096], "dtype": "float64", "low": 0, "high": 1}
    meta = {"observation_space": {"type": "Dict", "spaces": {f"k{i}": big for i in range(40)}}}
    monkeypatch.setattr(spaces.Space, "__init__", _never_built)
    with pytest.raises(ModelFileError, match=r"^model was trained on observation space Dict\('k0': Box\(shape "
                                             r"\[4096, 4096\], float64, low 0, high 1\), .*\.\.\., env has Box\("):
        check_spaces(meta, Env)

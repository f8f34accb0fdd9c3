"""MinAtar as an env family (``common/minatar_envs.py``): its ids through the runner, the ``minatar_cnn``
network, short runs of the shipped entries (in env worker processes too), and the one-line error without
the optional extra."""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import run
import run_util
from common.minatar_envs import MINATAR_PREFIX, register_minatar_envs
from common.nn.models import build_network

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHANNELS = {"Breakout": 4, "SpaceInvaders": 6, "Asterix": 4, "Freeway": 7, "Seaquest": 10}
needs_minatar = pytest.mark.skipif(importlib.util.find_spec("minatar") is None, reason="needs requirements-minatar.txt")


def _hide_minatar(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as without MinAtar installed: its modules do not import and its ids are not registered."""
    monkeypatch.setitem(sys.modules, "minatar", None)
    monkeypatch.setitem(sys.modules, "minatar.gym", None)
    for env_id in [k for k in gym.registry if k.startswith(MINATAR_PREFIX)]:
        monkeypatch.delitem(gym.registry, env_id)


def test_minatar_cnn_builds_and_its_numpy_mirror_acts_as_tensorflow() -> None:
    net = build_network("minatar_cnn", (10, 10, 4), seed=0)
    x = np.random.default_rng(0).random((5, 10, 10, 4)) < 0.2  # bool grids, as MinAtar observes
    latent = net(x.astype(np.float32)).numpy()
    assert latent.shape == (5, 128) and net.output_dim == 128 and net.has_numpy_mirror
    assert [(c.w.shape[0], c.w.shape[-1], c.stride) for c in net.convs] == [(3, 16, 1)]  # 16 3x3 filters
    np.testing.assert_allclose(net.numpy_forward(x), latent, rtol=1e-5, atol=1e-5)


@needs_minatar
@pytest.mark.parametrize("game", list(CHANNELS))
def test_minatar_ids_make_bool_grids(game: str) -> None:
    env_id = f"MinAtar/{game}-v1"
    assert run_util.get_env_type(env_id) == ("minatar", env_id)
    env = gym.make(env_id)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (10, 10, CHANNELS[game]) and obs.dtype == np.bool_ and obs in env.observation_space
    assert isinstance(env.action_space, gym.spaces.Discrete)
    obs, *_ = env.step(env.action_space.sample())
    assert obs.shape == (10, 10, CHANNELS[game]) and obs.dtype == np.bool_
    env.close()


@needs_minatar
def test_ppo2_trains_on_minatar_breakout_in_env_workers_and_plays(tmp_path) -> None:
    """The command line with the shipped entry (minatar_cnn, 8 envs here 2) and the envs in worker processes
    (forkserver: each registers the ids itself), then the model played."""
    log = tmp_path / "log"
    proc = subprocess.run(
        [sys.executable, "-m", "run", "--alg=ppo2", "--env=MinAtar/Breakout-v1", "--num_env=2", "--vec_env=subproc",
         "--num_timesteps=2048", "--seed=0", f"--log_path={log}", "--play", "--play_episodes=2", "--no_render"],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Training ppo2 on minatar:MinAtar/Breakout-v1 for 2048 timesteps with 2 env(s)" in proc.stdout
    assert "played 2 episodes" in proc.stdout
    config = json.loads((log / "config.json").read_text())
    assert config["env_type"] == "minatar" and config["learn_kwargs"]["network"] == "minatar_cnn"


@needs_minatar
def test_deepq_trains_on_minatar_with_its_entry(tmp_path) -> None:
    model = run.main(["--alg=deepq", "--env=MinAtar/Freeway-v1", "--num_timesteps=400", "--learning_starts=200",
                      "--buffer_size=1000", "--seed=0", f"--log_path={tmp_path / 'log'}", "--log_format=csv"])
    assert model.network == "minatar_cnn" and model.head == {"hiddens": [], "dueling": False, "layer_norm": False}
    assert not model.double_q


@needs_minatar
@pytest.mark.parametrize(("alg", "entry"), [
    ("rainbow", {"lr": 2.5e-4, "train_freq": 1, "adam_epsilon": 1e-8, "prioritized_replay_weights": "batch",
                 "num_atoms": 51, "v_min": -100.0, "v_max": 100.0}),
    ("qrdqn", {"lr": 1e-4, "train_freq": 4, "num_quantiles": 51})])
def test_rainbow_and_qrdqn_train_on_minatar_with_their_entries(tmp_path, alg: str, entry: dict) -> None:
    model = run.main([f"--alg={alg}", "--env=MinAtar/Breakout-v1", "--num_timesteps=400", "--learning_starts=200",
                      "--buffer_size=1000", "--seed=0", f"--log_path={tmp_path / 'log'}", "--log_format=csv"])
    assert model.network == "minatar_cnn" and model.head["hiddens"] == []
    config = json.loads((tmp_path / "log" / "config.json").read_text())["learn_kwargs"]
    assert {k: config[k] for k in ("n_step", "target_network_update_freq", *entry)} == {
        "n_step": 3, "target_network_update_freq": 1000, **entry}


def test_a_minatar_id_without_minatar_is_one_line_naming_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide_minatar(monkeypatch)
    with pytest.raises(run_util.UsageError) as info:
        run.main(["--alg=ppo2", "--env=MinAtar/Breakout-v1", "--num_timesteps=64"])
    assert str(info.value) == ("env 'MinAtar/Breakout-v1' is a MinAtar env, an optional extra: "
                               "pip install -r requirements-minatar.txt")


def test_minatar_is_imported_without_its_logged_warnings(monkeypatch: pytest.MonkeyPatch, tmp_path, capfd) -> None:
    """A stand-in ``minatar`` logs at import, as 1.0.15 does without seaborn: nothing shown, no root handler left."""
    _hide_minatar(monkeypatch)
    package = tmp_path / "minatar"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "gym.py").write_text(
        "import logging\nimport gymnasium\nlogging.warning('Cannot import seaborn.')\n"
        "def register_envs():\n"
        "    gymnasium.register(id='MinAtar/Breakout-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "minatar")
    monkeypatch.delitem(sys.modules, "minatar.gym")
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # as outside pytest, whose capture handler is there
    try:
        assert register_minatar_envs()
        assert "MinAtar/Breakout-v0" in gym.registry
    finally:
        gym.registry.pop("MinAtar/Breakout-v0", None)  # the stand-in's id (the real ones come back after the test)
    assert "seaborn" not in capfd.readouterr().err
    assert logging.getLogger().handlers == []


@needs_minatar
def test_minatar_envs_made_without_a_render_mode_import_no_drawing_library() -> None:
    """MinAtar imports matplotlib and seaborn for drawing (2-4 s): training and evaluation envs go without."""
    code = ("import sys, gymnasium; from common.minatar_envs import register_minatar_envs; register_minatar_envs(); "
            "gymnasium.make('MinAtar/Breakout-v1').reset(seed=0); "
            "print(sorted(m for m in ('matplotlib', 'seaborn') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"


@needs_minatar
def test_play_video_of_a_minatar_game_writes_uint8_frames_of_16_pixels_a_cell(tmp_path) -> None:
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    videos = tmp_path / "videos"
    proc = subprocess.run(
        [sys.executable, "-m", "run", "--alg=tests.fake_alg:learn", "--env=MinAtar/Breakout-v1", "--num_timesteps=16",
         f"--log_path={tmp_path / 'log'}", "--play", "--play_episodes=1", f"--play_video={videos}"],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    length = int(re.search(r"^episode 1: return \S+ length (\d+)$", proc.stdout, re.MULTILINE).group(1))
    frames = imageio_ffmpeg.read_frames(str(videos / "MinAtar-Breakout-v1-episode-1.mp4"))
    meta = next(frames)
    assert meta["size"] == (160, 160) and meta["fps"] == 20
    assert len(list(frames)) == length + 1


@needs_minatar
@pytest.mark.parametrize("game", list(CHANNELS))
def test_minatar_rgb_frames_colour_each_cell_as_minatars_gui(game: str) -> None:
    pytest.importorskip("seaborn")  # MinAtar's own rgb_array rendering (float64, a pixel a cell) needs it
    assert register_minatar_envs()
    env = gym.make(f"MinAtar/{game}-v1", render_mode="rgb_array")
    env.reset(seed=0)
    for _ in range(20):
        env.step(env.action_space.sample())
    frame = env.render()
    assert frame.shape == (160, 160, 3) and frame.dtype == np.uint8
    assert (frame == np.repeat(np.repeat(frame[::16, ::16], 16, axis=0), 16, axis=1)).all()  # 16x16 squares
    np.testing.assert_array_equal(frame[::16, ::16], np.round(env.unwrapped.render() * 255))
    env.close()

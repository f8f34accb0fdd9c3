"""Hyperparameter tables (hyperparams/<alg>.toml) and the runner's layering of them."""
import json
import os
import re
import subprocess
import sys

import pytest

import run
from algos import hyperparameters
from algos.base import algorithm_names
from common.errors import ConfigError, UserError
from runner.config import resolve
from runner.envs import build_env


def _config(tmp_path, *argv: str, hyperparams: str | None = None):
    if hyperparams is not None:
        path = tmp_path / "hp.toml"
        path.write_text(hyperparams)
        argv = (*argv, f"--hyperparams={path}")
    args, extra = run.parse_args(list(argv))
    return resolve(run.complete_args(args), extra)


@pytest.mark.parametrize("alg", algorithm_names())
def test_every_algorithm_has_a_table_whose_entries_are_checked(alg: str) -> None:
    tab = hyperparameters.table(alg)
    assert tab.defaults and set(tab.defaults) <= set(tab.kinds)
    for entry in (*tab.by_env_type.values(), *tab.by_env_id.values()):
        for key, value in entry.items():
            if key in tab.kinds:
                assert tab.check(key, value) == value


def test_layers_in_order_with_the_source_of_each_value(tmp_path) -> None:
    config = _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", "--lam=0.9", hyperparams="""
nminibatches = 2
noptepochs = 3
lam = 0.5
[env_type.classic_control]
noptepochs = 5
[env."CartPole-v1"]
ent_coef = 0.01
[env."Acrobot-v1"]
ent_coef = 0.5
""")
    hp, src = config.hyperparameters, config.sources
    assert hp["lam"] == 0.9 and src["lam"] == "command line"
    assert hp["ent_coef"] == 0.01 and src["ent_coef"].endswith('[env."CartPole-v1"]')
    assert hp["noptepochs"] == 5 and src["noptepochs"].endswith("[env_type.classic_control]")
    assert hp["nminibatches"] == 2 and src["nminibatches"].endswith("hp.toml")
    assert hp["nsteps"] == 32 and src["nsteps"] == 'hyperparams/ppo2.toml [env."CartPole-v1"]'
    assert hp["vf_coef"] == 0.5 and "vf_coef" not in src  # the algorithm's default
    assert "vf_coef" not in config.learn_kwargs and config.learn_kwargs["lam"] == 0.9
    assert 'nsteps = 32  [hyperparams/ppo2.toml [env."CartPole-v1"]]' in config.describe()


def test_config_json_records_values_and_sources(tmp_path) -> None:
    log = tmp_path / "log"
    run.main(["--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=256", "--nsteps=16", f"--log_path={log}",
              "--log_format=csv", "--no_progress"])
    config = json.loads((log / "config.json").read_text())
    assert config["learn_kwargs"]["nsteps"] == 16 and config["learn_kwarg_sources"]["nsteps"] == "command line"
    assert config["learn_kwarg_sources"]["lam"] == 'hyperparams/ppo2.toml [env."CartPole-v1"]'
    assert config["hyperparameters"]["vf_coef"] == 0.5


@pytest.mark.parametrize(("text", "message"), [
    ("nstepz = 3\n", "hp.toml: nstepz is neither a hyperparameter of algorithm 'ppo2'"),
    ('[env."CartPole-v1"]\nnsteps = "many"\n', 'hp.toml [env."CartPole-v1"]: nsteps expects int, got str'),
    ("[env_type.classic_control]\ngamma = true\n", "hp.toml [env_type.classic_control]: gamma expects float"),
    ("nsteps = = 3\n", "hp.toml: not valid TOML"),
    ("env = 3\n", "[env.env] must be a table"),
])
def test_bad_hyperparameter_files_are_one_line(tmp_path, text: str, message: str) -> None:
    with pytest.raises(UserError) as e:
        _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", hyperparams=text)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_bad_shipped_table_names_file_entry_and_key(tmp_path, monkeypatch) -> None:
    (tmp_path / "ppo2.toml").write_text('[defaults]\nnsteps = 8\n[env_type.box2d]\nnsteps = "x"\n')
    monkeypatch.setattr(hyperparameters, "TABLES_DIR", str(tmp_path))
    hyperparameters.table.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"ppo2.toml \[env_type.box2d\]: nsteps expects int, got str 'x'"):
            hyperparameters.table("ppo2")
    finally:
        hyperparameters.table.cache_clear()


def test_one_entry_serves_the_env_types_its_header_lists(tmp_path) -> None:
    """trpo's shipped entry and a --hyperparams file both name several env types in one header."""
    tab = hyperparameters.table("trpo")
    assert tab.by_env_type["box2d"] == tab.by_env_type["classic_control"] and tab.by_env_type["box2d"]
    config = _config(tmp_path, "--alg=trpo", "--env=LunarLander-v3", hyperparams="""
[env_type."classic_control, box2d"]
lam = 0.9
""")
    assert config.hyperparameters["lam"] == 0.9
    assert config.sources["lam"].endswith('hp.toml [env_type."classic_control, box2d"]')
    assert config.sources["max_kl"] == 'hyperparams/trpo.toml [env_type."classic_control, box2d"]'


def test_an_env_type_named_by_two_entries_is_one_line(tmp_path, monkeypatch) -> None:
    (tmp_path / "ppo2.toml").write_text('[defaults]\nnsteps = 8\n[env_type.box2d]\nnsteps = 4\n'
                                        '[env_type."classic_control, box2d"]\nnsteps = 2\n')
    monkeypatch.setattr(hyperparameters, "TABLES_DIR", str(tmp_path))
    hyperparameters.table.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r'ppo2.toml \[env_type."classic_control, box2d"\]: env type box2d '
                                              r"already has the entry \[env_type.box2d\]"):
            hyperparameters.table("ppo2")
    finally:
        hyperparameters.table.cache_clear()


def test_a_text_value_outside_its_choices_is_one_line_before_any_env_is_made(tmp_path) -> None:
    with pytest.raises(ConfigError) as e:
        _config(tmp_path, "--alg=a2c", "--env=CartPole-v1", "--rmsprop=torch")
    assert str(e.value) == ("--rmsprop must be one of 'tf1', 'pytorch' (hyperparams/a2c.toml [choices]), "
                            "got 'torch'")
    with pytest.raises(ConfigError, match=r"dict_observations must be one of 'keep', 'flatten' .*\[choices\]"):
        _config(tmp_path, "--alg=sac", "--env=Pendulum-v1", hyperparams='dict_observations = "stack"\n')
    assert _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", "--jit_compile=False").hyperparameters[
        "jit_compile"] is False  # choices bind text values only


def test_the_tables_choices_are_the_words_the_code_accepts() -> None:
    from algos.deepq.distributional import KINDS
    from algos.her.model import HER_MODELS
    from algos.offpolicy.actor_critic import DICT_MODES
    from algos.selfplay.pool import SAMPLINGS
    from common.buffers.her import STRATEGIES
    from common.buffers.prioritized import WEIGHT_NORMALISATIONS
    from common.nn.tf_util import RMSProp

    table = hyperparameters.table
    assert table("a2c").choices == {"rmsprop": RMSProp.STYLES, "opponent_sampling": SAMPLINGS}
    assert table("rainbow").choices == {"distributional": KINDS, "jit_compile": ("auto",),
                                        "prioritized_replay_weights": WEIGHT_NORMALISATIONS}
    assert all(table(alg).choices["dict_observations"] == DICT_MODES for alg in ("ddpg", "sac", "td3", "tqc"))
    assert set(table("her").choices["her_algorithm"]) == set(HER_MODELS)
    assert table("her").choices["goal_selection_strategy"] == STRATEGIES
    assert all(table(alg).choices["opponent_sampling"] == SAMPLINGS for alg in ("ppo2", "trpo"))


def test_learn_from_python_takes_table_defaults_and_baselines_aliases() -> None:
    tab = hyperparameters.table("deepq")
    hp, net = hyperparameters.settle(tab, {"grad_norm_clipping": 5, "num_layers": 1}, "mlp")
    assert hp.max_grad_norm == 5 and hp.gradient_steps_per_call is None and hp.lr == tab.defaults["lr"]
    assert net == {"num_layers": 1}
    with pytest.raises(ConfigError, match="does not accept bogus"):
        hyperparameters.settle(tab, {"bogus": 1}, "mlp")


def test_bad_hyperparams_file_exits_2_with_one_line(tmp_path) -> None:
    path = tmp_path / "hp.toml"
    path.write_text("[env_type.classic_control]\nnsteps = 2.5\n")
    proc = subprocess.run([sys.executable, "-m", "run", "--env=CartPole-v1", f"--hyperparams={path}"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"run: error: {path} [env_type.classic_control]: nsteps expects int, got float 2.5"]


def test_vec_normalize_comes_from_entries(tmp_path) -> None:
    assert _config(tmp_path, "--alg=ppo2", "--env=Hopper-v5").vec_normalize is True
    assert _config(tmp_path, "--alg=ddpg", "--env=Hopper-v5").vec_normalize is False  # replay buffer: no
    assert _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1").vec_normalize is False
    with pytest.raises(UserError, match=r"hp.toml: vec_normalize expects bool, got 'yes'"):
        _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", hyperparams='vec_normalize = "yes"\n')


def test_env_kwargs_come_from_entries_and_the_command_line_wins_per_key(tmp_path) -> None:
    text = '[env."CartPole-v1"]\nenv_kwargs = { sutton_barto_reward = true, render_mode = "rgb_array" }\n'
    config = _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", hyperparams=text)
    assert config.env_kwargs == {"sutton_barto_reward": True, "render_mode": "rgb_array"}
    assert config.sources["env_kwargs"].endswith('hp.toml [env."CartPole-v1"]')
    assert config.env_record()["env_kwargs"] == config.env_kwargs  # saved in model files: play rebuilds it
    assert "env_kwargs = {'sutton_barto_reward': True" in config.describe()
    assert "env_kwargs" not in config.learn_kwargs
    config = _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", "--env_kwargs={'render_mode': None}",
                     hyperparams=text)
    assert config.env_kwargs == {"sutton_barto_reward": True, "render_mode": None}
    assert config.sources["env_kwargs"] == "command line"
    assert _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1").env_kwargs == {}
    with pytest.raises(UserError, match=r"hp.toml: env_kwargs expects a table of gym.make keyword arguments, got 3"):
        _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", hyperparams="env_kwargs = 3\n")


def test_num_env_comes_from_entries_and_the_command_line_wins(tmp_path) -> None:
    text = '[env."CartPole-v1"]\nnum_env = 3\n'
    config = _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", hyperparams=text)
    assert config.num_env == 3 and config.sources["num_env"].endswith('hp.toml [env."CartPole-v1"]')
    assert "num_env = 3" in config.describe() and "num_env" not in config.learn_kwargs
    assert config.record()["num_env"] == 3
    env = build_env(config)
    try:
        assert env.num_envs == 3
    finally:
        env.close()
    config = _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", "--num_env=5", hyperparams=text)
    assert config.num_env == 5 and config.sources["num_env"] == "command line"
    config = _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1")
    assert config.num_env is None and "num_env" not in config.describe()  # the runner's choice (1 here)
    for bad in ("0", "2.0", "true"):
        with pytest.raises(UserError, match=rf"hp.toml: num_env expects an integer >= 1, got {bad.title()}"):
            _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", hyperparams=f"num_env = {bad}\n")


def test_ppo2_ant_entry_leaves_contact_forces_out_of_the_observation(tmp_path) -> None:
    config = _config(tmp_path, "--alg=ppo2", "--env=Ant-v5")
    assert config.env_kwargs == {"include_cfrc_ext_in_observation": False}
    assert _config(tmp_path, "--alg=sac", "--env=Ant-v5").env_kwargs == {}  # ppo2's entry only


def test_a_model_files_env_kwargs_are_used_whole_when_the_env_comes_from_it(tmp_path) -> None:
    model = tmp_path / "m.zip"
    run.main(["--alg=ppo2", "--env=CartPole-v1", "--num_timesteps=64", "--nsteps=32", f"--save_path={model}",
              f"--log_path={tmp_path / 'log'}", "--log_format=csv", "--no_progress"])  # made with no env_kwargs
    text = '[env."CartPole-v1"]\nenv_kwargs = { sutton_barto_reward = true }\n'
    config = _config(tmp_path, f"--load_path={model}", "--num_timesteps=0", hyperparams=text)
    assert config.env_kwargs == {}  # the file's env, not the entry's
    assert config.sources["env_kwargs"] == f"model file {model}"
    config = _config(tmp_path, "--env=CartPole-v1", f"--load_path={model}", "--num_timesteps=0", hyperparams=text)
    assert config.env_kwargs == {"sutton_barto_reward": True}  # --env given: the entries apply as in training


def test_atari_entrys_compute_dtype_goes_to_image_networks_and_is_passed_over_for_others(tmp_path) -> None:
    for network in ("cnn", "impala_cnn", "cnn_lstm"):
        config = _config(tmp_path, "--alg=ppo2", "--env=PongNoFrameskip-v4", f"--network={network}")
        assert config.learn_kwargs["compute_dtype"] == "auto"
    for network in ("mlp", "lstm"):  # e.g. RAM observations: the entry's option does not apply
        config = _config(tmp_path, "--alg=ppo2", "--env=PongNoFrameskip-v4", f"--network={network}")
        assert "compute_dtype" not in config.learn_kwargs
    with pytest.raises(UserError, match="does not accept --compute_dtype") as e:  # asked for: still checked
        _config(tmp_path, "--alg=ppo2", "--env=PongNoFrameskip-v4", "--network=lstm", "--compute_dtype=bfloat16")
    assert "\n" not in str(e.value)
    config = _config(tmp_path, "--alg=ppo2", "--env=PongNoFrameskip-v4", "--network=mlp", "--compute_dtype=bfloat16")
    assert config.learn_kwargs["compute_dtype"] == "bfloat16"  # the mlp has it, when the command line asks
    config = _config(tmp_path, "--alg=ppo2", "--env=PongNoFrameskip-v4", "--compute_dtype=float32")
    assert config.learn_kwargs["compute_dtype"] == "float32"


@pytest.mark.parametrize(("argv", "message"), [
    (["--alg=ppo2", "--log_interval=0"], "--log_interval must be at least 1 (hyperparams/ppo2.toml [ranges]), got 0"),
    (["--alg=ppo2", "--noptepochs=1e8"],
     "--noptepochs must be at most 1000 (hyperparams/ppo2.toml [ranges]), got 100000000"),
    (["--alg=ppo2", "--num_layers=1e5"],
     "--num_layers must be at most 100 (algos/hyperparameters.py NETWORK_RANGES), got 100000"),
    (["--alg=trpo", "--vf_iters=1e6"], "--vf_iters must be at most 1000 (hyperparams/trpo.toml [ranges]), got 1000000"),
])
def test_counts_outside_their_range_are_one_line_naming_the_limit(tmp_path, argv: list, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        _config(tmp_path, *argv, "--env=CartPole-v1")
    assert str(e.value) == message


@pytest.mark.parametrize("alg", [a for a in algorithm_names() if "log_interval" in hyperparameters.table(a).kinds])
def test_every_algorithm_refuses_a_log_interval_of_0(alg: str) -> None:
    with pytest.raises(ConfigError, match=rf"log_interval must be at least 1 \(hyperparams/{alg}.toml \[ranges\]\)"):
        hyperparameters.settle(hyperparameters.table(alg), {"log_interval": 0}, "mlp")


def test_a_hyperparams_file_value_outside_its_range_names_file_and_limit(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"hp.toml: noptepochs must be at most 1000 \(hyperparams/ppo2.toml "
                                          r"\[ranges\]\), got 5000$"):
        _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", hyperparams="noptepochs = 5000\n")


@pytest.mark.parametrize(("ranges", "message"), [("nsteps = [1, 2, 3]", "expected [low], [low, high]"),
                                                 ('nsteps = "> x"', "expected [low], [low, high]"),
                                                 ("nstepz = [1]", "nstepz is not a hyperparameter")])
def test_bad_shipped_ranges_are_one_line(tmp_path, monkeypatch, ranges: str, message: str) -> None:
    (tmp_path / "ppo2.toml").write_text(f"[defaults]\nnsteps = 8\n[ranges]\n{ranges}\n")
    monkeypatch.setattr(hyperparameters, "TABLES_DIR", str(tmp_path))
    hyperparameters.table.cache_clear()
    try:
        with pytest.raises(ConfigError, match=re.escape(message)):
            hyperparameters.table("ppo2")
    finally:
        hyperparameters.table.cache_clear()


@pytest.mark.parametrize("alg", algorithm_names())
def test_every_algorithm_declares_the_range_of_its_discount(alg: str) -> None:
    with pytest.raises(ConfigError, match=rf"^gamma must be at most 1 \(hyperparams/{alg}.toml \[ranges\]\), got 1.5$"):
        hyperparameters.settle(hyperparameters.table(alg), {"gamma": 1.5}, "mlp")


def test_learn_refuses_a_value_outside_its_range() -> None:
    from algos.ppo2.ppo2 import learn
    from tests.conftest import _monitored_venv

    env = _monitored_venv("CartPole-v1", n=1)
    try:
        with pytest.raises(ConfigError, match=r"^lam must be at most 1 \(hyperparams/ppo2.toml \[ranges\]\), got 2$"):
            learn(env=env, network="mlp", total_timesteps=64, lam=2)
    finally:
        env.close()


def test_a_file_value_that_does_not_fit_the_chosen_network_names_the_flag_that_resolves_it(tmp_path) -> None:
    with pytest.raises(UserError, match=r"hp.toml: value_network='copy' does not fit --network=lstm .*; add "
                                        r"--value_network=None$"):
        _config(tmp_path, "--alg=ppo2", "--env=Acrobot-v1", "--network=lstm", hyperparams="value_network = 'copy'\n")
    config = _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1", "--network=lstm")
    assert "value_network" not in config.learn_kwargs and config.hyperparameters["value_network"] is None


@pytest.mark.parametrize("alg", algorithm_names())
def test_every_alias_names_a_hyperparameter_and_reaches_learn_under_its_name(tmp_path, alg: str) -> None:
    tab = hyperparameters.table(alg)
    for alias, (name, _) in tab.aliases.items():
        hp, _ = hyperparameters.settle(tab, {alias: tab.defaults[name]}, "mlp")
        assert getattr(hp, name) == tab.defaults[name] and not hasattr(hp, alias)
    for name, text in tab.unlike.items():
        with pytest.raises(ConfigError, match=re.escape(f"does not accept {name}; {text}")):
            hyperparameters.settle(tab, {name: 1}, "mlp")


def test_a_hyperparams_file_may_use_other_libraries_names(tmp_path) -> None:
    config = _config(tmp_path, "--alg=ppo2", "--env=CartPole-v1",
                     hyperparams="learning_rate = 1e-3\nn_epochs = 3\nn_envs = 4\nnormalize = true\n")
    assert config.learn_kwargs["lr"] == 1e-3 and config.learn_kwargs["noptepochs"] == 3
    assert config.num_env == 4 and config.vec_normalize is True
    assert config.notes == [f"note: {tmp_path / 'hp.toml'}: learning_rate -> lr (stable-baselines3's name)",
                            f"note: {tmp_path / 'hp.toml'}: n_epochs -> noptepochs (stable-baselines3's name)",
                            f"note: {tmp_path / 'hp.toml'}: n_envs -> num_env (rl-baselines3-zoo's name)",
                            f"note: {tmp_path / 'hp.toml'}: normalize -> vec_normalize (rl-baselines3-zoo's name)"]


def test_the_names_page_lists_every_alias_and_refusal() -> None:
    from runner.cli import FLAG_ALIASES

    with open(os.path.join(hyperparameters.TABLES_DIR, os.pardir, "docs", "names.md"), encoding="utf-8") as f:
        page = f.read()
    for alias, (name, library) in FLAG_ALIASES.items():
        assert f"| `--{alias}` | `--{name}` | {library} |" in page
    for alg in algorithm_names():
        tab = hyperparameters.table(alg)
        assert all(f"| `{alias}` | `{name}` | {library} |" in page for alias, (name, library) in tab.aliases.items())
        assert all(f"| `{name}` | {text} |" in page for name, text in tab.unlike.items())

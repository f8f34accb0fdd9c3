"""--env_kwargs and --wrapper: they reach the envs in worker processes and come back from model files."""
import json

import pytest

import run
from common.errors import UserError
from common.wrappers.monitor import load_results

OPTIONS = ["--env=IdentityDiscrete-v0", "--env_kwargs={'n': 6}", "--wrapper=envs.wrappers:RewardOffset(offset=1.0)"]


def test_env_kwargs_and_wrappers_reach_subprocess_envs_and_survive_save_then_evaluate(tmp_path, capsys) -> None:
    log, model_path = tmp_path / "log", tmp_path / "m.zip"
    model = run.main(["--alg=ppo2", *OPTIONS, "--num_env=2", "--vec_env=subproc", "--num_timesteps=512",
                      "--nsteps=128", f"--log_path={log}", "--log_format=csv", "--no_progress",
                      f"--save_path={model_path}"])
    assert model.observation_space.n == 6  # env_kwargs reached gym.make
    episodes = load_results(str(log))
    assert len(episodes["r"]) > 0 and min(episodes["r"]) >= 100  # +1 per step inside the Monitor, 100 steps
    record = json.loads((log / "config.json").read_text())["env_record"]
    assert record == {"env": "IdentityDiscrete-v0", "env_kwargs": {"n": 6},
                      "wrappers": ["envs.wrappers:RewardOffset(offset=1.0)"]}
    capsys.readouterr()
    run.main([f"--load_path={model_path}", "--num_timesteps=0", "--eval_episodes=2", f"--log_path={tmp_path / 'b'}",
              "--log_format=csv", OPTIONS[2]])  # no --env: the file's env and kwargs, its wrapper named again
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("evaluation over 2 episodes: return ") and float(line.split()[5]) >= 100


@pytest.mark.parametrize(("flag", "message"), [
    ("--wrapper=envs.wrappers:Nope", "envs.wrappers has no Nope"),
    ("--wrapper=no_such_module_x:W", "cannot import no_such_module_x"),
    ("--wrapper=envs.identity:IdentityDiscreteEnv", "is not a gymnasium.Wrapper subclass"),
    ("--wrapper=envs.wrappers:RewardOffset(1)", "arguments must be key=literal"),
    ("--wrapper=RewardOffset", "expected module:Class"),
])
def test_bad_wrappers_are_one_line(flag: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as e:
        run.main(["--alg=tests.fake_alg:learn", "--env=IdentityDiscrete-v0", flag])
    assert "\n" not in str(e.value)


def test_bad_env_kwargs_are_one_line() -> None:
    with pytest.raises(UserError, match=r"--env_kwargs: expected a dict literal") as e:
        run.main(["--env=CartPole-v1", "--env_kwargs=[1, 2]"])
    assert "\n" not in str(e.value)

"""The ``runner`` console command of an installed project: ``python -m run`` from any folder."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER_ENV = '''import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

gym.register("MyCart-v0", entry_point=CartPoleEnv, max_episode_steps=50)
'''


def test_console_command_trains_the_users_env_from_another_folder(tmp_path):
    """As the installed ``runner`` script runs it: its own folder first on the path, the user's folder not."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir()
    work.mkdir()
    (bin_dir / "runner").write_text("import sys\nfrom runner.console import main\nsys.exit(main())\n")
    (work / "mymod.py").write_text(USER_ENV)
    proc = subprocess.run([sys.executable, str(bin_dir / "runner"), "--alg=ppo2", "--env=mymod:MyCart-v0",
                           "--num_timesteps=512", "--nsteps=128", "--log_path=log", "--log_format=csv"],
                          cwd=work, capture_output=True, text=True, timeout=180, check=False,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (work / "log" / "progress.csv").exists() and (work / "log" / "model.zip").exists()
    assert '"env": "mymod:MyCart-v0"' in (work / "log" / "config.json").read_text()

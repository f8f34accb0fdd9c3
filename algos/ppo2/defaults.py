"""PPO2 hyperparameters per env_type (``run.py`` merges them under the command-line values)."""


def classic_control() -> dict:
    """Tuned for CartPole-v1 with 8 envs: solved well within 1e5 steps (see bench/train.py)."""
    return {
        "nsteps": 32,
        "nminibatches": 1,
        "noptepochs": 20,
        "lam": 0.8,
        "gamma": 0.98,
        "ent_coef": 0.0,
        "lr": "lin_1e-3",
        "cliprange": "lin_0.2",
        "log_interval": 10,
        "value_network": "copy",
    }


def atari() -> dict:
    """baselines' Atari settings."""
    return {
        "nsteps": 128,
        "nminibatches": 4,
        "lam": 0.95,
        "gamma": 0.99,
        "noptepochs": 4,
        "log_interval": 1,
        "ent_coef": 0.01,
        "lr": "lin_2.5e-4",
        "cliprange": "lin_0.1",
    }


def mujoco() -> dict:
    """baselines' MuJoCo settings (use with VecNormalize)."""
    return {
        "nsteps": 2048,
        "nminibatches": 32,
        "lam": 0.95,
        "gamma": 0.99,
        "noptepochs": 10,
        "log_interval": 1,
        "ent_coef": 0.0,
        "lr": 3e-4,
        "cliprange": 0.2,
        "value_network": "copy",
    }

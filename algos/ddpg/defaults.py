"""DDPG hyperparameters per env_type (``run.py`` merges them under the command-line values)."""


def classic_control() -> dict:
    """The bench/train.py Pendulum-v1 settings (stable-baselines3's DDPG zoo config, batch 256)."""
    return {
        "network": "mlp",
        "num_hidden": [400, 300],
        "activation": "relu",
        "noise_type": "normal_0.1",
        "gamma": 0.98,
        "buffer_size": 200_000,
        "learning_starts": 10_000,
        "actor_lr": 1e-3,
        "critic_lr": 1e-3,
        "batch_size": 256,
        "nb_rollout_steps": 100,
        "nb_train_steps": 100,
        "tau": 0.005,
        "critic_l2_reg": 0.0,
        "normalize_observations": False,
    }


def mujoco() -> dict:
    """baselines-like MuJoCo settings with the 400x300 ReLU networks of the DDPG paper."""
    return {
        "num_hidden": [400, 300],
        "activation": "relu",
        "noise_type": "normal_0.1",
        "batch_size": 256,
        "nb_rollout_steps": 100,
        "nb_train_steps": 100,
        "learning_starts": 10_000,
        "actor_lr": 1e-3,
        "critic_lr": 1e-3,
        "tau": 0.005,
        "critic_l2_reg": 0.0,
    }

"""deepq hyperparameters per env_type (``run.py`` merges them under the command-line values)."""


def atari() -> dict:
    """baselines' Atari settings: conv_only with a dueling 256-unit head, prioritized replay."""
    return {
        "network": "conv_only",
        "lr": 1e-4,
        "buffer_size": 10000,
        "exploration_fraction": 0.1,
        "exploration_final_eps": 0.01,
        "train_freq": 4,
        "learning_starts": 10000,
        "target_network_update_freq": 1000,
        "gamma": 0.99,
        "prioritized_replay": True,
        "prioritized_replay_alpha": 0.6,
        "hiddens": [],
        "dueling": True,
    }


def classic_control() -> dict:
    """rl-zoo's CartPole-v1 DQN settings (mlp of two ReLU layers of 256) with baselines' double Q and a dueling
    head of linear streams; after 50k steps the greedy policy scores >= 475 on 4 of seeds 0-4 (bench/train.py;
    evals 492, 500, 500, 500, 156). stable-baselines3's plain head (no dueling, no double Q) scored 1/5 here."""
    return {
        "network": "mlp",
        "num_layers": 2,
        "num_hidden": 256,
        "activation": "relu",
        "hiddens": [],
        "dueling": True,
        "double_q": True,
        "lr": 2.3e-3,
        "batch_size": 64,
        "buffer_size": 100000,
        "learning_starts": 1000,
        "gamma": 0.99,
        "target_network_update_freq": 10,
        "train_freq": 256,
        "gradient_steps": 128,
        "exploration_fraction": 0.16,
        "exploration_final_eps": 0.04,
    }

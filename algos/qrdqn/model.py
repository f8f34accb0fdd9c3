"""QR-DQN's model: deepq's with the quantile head (hyperparams/qrdqn.toml's defaults)."""
from algos.deepq.variants import variant_model

QRDQNModel = variant_model("qrdqn")

"""Rainbow's model: deepq's with the C51 head, noisy layers, dueling and double Q (hyperparams/rainbow.toml)."""
from algos.deepq.variants import variant_model

RainbowModel = variant_model("rainbow")

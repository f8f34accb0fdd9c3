"""Rainbow (Hessel et al. 2018): deepq with n-step returns, the C51 head, noisy layers, dueling, double Q and
prioritized replay, and Dopamine's settings (hyperparams/rainbow.toml): ``learn``, ``load``."""
from algos.base import loader
from algos.deepq.variants import variant_learn
from algos.rainbow.model import RainbowModel

learn = variant_learn("rainbow", RainbowModel)
load = loader(RainbowModel)

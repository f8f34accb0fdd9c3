"""QR-DQN (Dabney et al. 2018): deepq with the quantile head and the quantile Huber loss, and
stable-baselines3-contrib's settings (hyperparams/qrdqn.toml): ``learn``, ``load``."""
from algos.base import loader
from algos.deepq.variants import variant_learn
from algos.qrdqn.model import QRDQNModel

learn = variant_learn("qrdqn", QRDQNModel)
load = loader(QRDQNModel)

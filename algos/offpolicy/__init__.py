"""What the off-policy actor-critics (ddpg, sac, td3) share: the training loop (``loop``), the model base
with networks, observation normalisation, action scaling and saving (``actor_critic``), and exploration
(``exploration``). Each algorithm adds its losses and its fused update."""

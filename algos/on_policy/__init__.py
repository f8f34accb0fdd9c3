"""What the on-policy algorithms (ppo2, a2c, trpo) share: rollout collection, the learn() loop, the model base."""

"""DDPG: deep deterministic policy gradient for continuous (Box) actions."""

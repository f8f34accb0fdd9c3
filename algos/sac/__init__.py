"""Soft Actor-Critic: ``algos.sac.sac.learn`` and ``load``."""

"""TD3: ``algos.td3.td3.learn`` and ``load``."""

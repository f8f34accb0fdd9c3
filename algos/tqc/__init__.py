"""Truncated quantile critics: ``algos.tqc.tqc.learn`` and ``load``."""

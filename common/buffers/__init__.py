"""Experience storage: uniform and prioritized replay (off-policy), rollout storage with GAE (on-policy).

``replay`` (``ReplayBuffer``, ``terminal_aware_next``), ``prioritized`` (``PrioritizedReplayBuffer``),
``segment_tree`` (the sum/min trees prioritized replay samples with) and ``rollout`` (``RolloutStorage``,
``compute_gae``, ``bootstrap_truncated``).
"""

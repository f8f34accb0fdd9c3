"""Self-play for the on-policy algorithms: numpy snapshots of the policy (``snapshot``), the pool of past
snapshots the opponents are drawn from (``pool``), the hook the on-policy loop calls after every update
(``hook``) and the evaluation against a random player and the pool with Elo ratings (``evaluation``)."""

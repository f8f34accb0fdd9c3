"""Hindsight experience replay on the off-policy actor-critics (``--alg=her --her_algorithm=sac|td3|ddpg``)."""

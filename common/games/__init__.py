"""Games of two (or more) players and the single-agent view a learner trains in (numpy and gymnasium only:
these modules run inside vec-env workers, which never import TensorFlow).

- ``protocol``: the small ``Game`` protocol a user's own game implements.
- ``players``: opponents (random, a policy from numpy weights, a person at the terminal).
- ``self_play_env``: ``SelfPlayEnv``, one seat for the learner, the others played by opponents.
- ``match``: games between players, outside any env (evaluation, ratings, benchmarks).
- ``pettingzoo``: PettingZoo AEC and parallel envs as ``Game`` objects (optional extra).
"""

"""The log keys every algorithm writes (docs/usage.md lists them); plots and the progress bar read these."""

TOTAL_TIMESTEPS = "time/total_timesteps"  # env steps of all envs and MPI ranks
FPS = "time/fps"
TIME_ELAPSED = "time/time_elapsed"
EPISODES = "time/episodes"
EP_RETURN_MEAN = "rollout/ep_rew_mean"  # mean return of the last 100 training episodes, env's own units
EP_LENGTH_MEAN = "rollout/ep_len_mean"
LOG_KEYS = (TOTAL_TIMESTEPS, FPS, TIME_ELAPSED, EPISODES, EP_RETURN_MEAN, EP_LENGTH_MEAN)
# evaluation during training (--eval_freq): deterministic episodes in a separate env, env's own units
EVAL_RETURN_MEAN = "eval/return_mean"
EVAL_RETURN_STD = "eval/return_std"
EVAL_LENGTH_MEAN = "eval/length_mean"
EVAL_TIME = "eval/time"  # seconds the evaluation took (left out of time/fps)
EVAL_SUCCESS_RATE = "eval/success_rate"  # goal envs: share of episodes ending with info["is_success"]
EVAL_KEYS = (EVAL_RETURN_MEAN, EVAL_RETURN_STD, EVAL_LENGTH_MEAN, EVAL_TIME)
# self-play (algos/selfplay): the learner's win, draw and loss rates; at evaluations, its Elo rating
SELFPLAY_TRAIN = ("selfplay/train_win", "selfplay/train_draw", "selfplay/train_loss")  # training games vs the pool
SELFPLAY_RANDOM = ("selfplay/random_win", "selfplay/random_draw", "selfplay/random_loss")  # best moves vs random
SELFPLAY_POOL = ("selfplay/pool_win", "selfplay/pool_draw", "selfplay/pool_loss")  # sampled moves vs the pool
SELFPLAY_LOOKAHEAD = ("selfplay/lookahead_win", "selfplay/lookahead_draw",
                      "selfplay/lookahead_loss")  # Connect Four: best moves vs one-step lookahead
SELFPLAY_WORST_SEAT = {"random": "selfplay/random_win_worst_seat",  # the lower win rate of the two seats
                       "lookahead": "selfplay/lookahead_win_worst_seat"}
SELFPLAY_GAMES = {"random": "selfplay/random_games", "pool": "selfplay/pool_games",  # the games behind each
                  "lookahead": "selfplay/lookahead_games"}  # evaluation's rates
SELFPLAY_ELO = "selfplay/elo"  # random player = 0
SELFPLAY_POOL_SIZE = "selfplay/pool_size"
SELFPLAY_EVAL_TIME = "selfplay/eval_time"  # seconds (left out of time/fps)

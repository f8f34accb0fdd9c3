"""The log keys every algorithm writes (README lists them); plots and the progress bar read these."""

TOTAL_TIMESTEPS = "time/total_timesteps"  # env steps of all envs and MPI ranks
FPS = "time/fps"
TIME_ELAPSED = "time/time_elapsed"
EPISODES = "time/episodes"
EP_RETURN_MEAN = "rollout/ep_rew_mean"  # mean return of the last 100 training episodes, env's own units
EP_LENGTH_MEAN = "rollout/ep_len_mean"
LOG_KEYS = (TOTAL_TIMESTEPS, FPS, TIME_ELAPSED, EPISODES, EP_RETURN_MEAN, EP_LENGTH_MEAN)

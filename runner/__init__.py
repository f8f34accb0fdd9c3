"""The command-line application: flags, configuration, envs of a run, saving, resuming, evaluation, play,
the learning curve's helper process, and the ``runner`` console command."""

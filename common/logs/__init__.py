"""Logging and its outputs, log key names, the progress bar, learning curves and their plots."""

"""Env wrappers: Monitor, Atari preprocessing, action masks, env state, the user's own wrappers."""

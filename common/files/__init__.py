"""Files the runner reads and writes: model files, spaces in JSON, what model files share, training-state checkpoints. Every file is untrusted input, read with bounded memory."""

"""The process itself: quiet TensorFlow start-up, deferred namespaces, signals, standard streams."""

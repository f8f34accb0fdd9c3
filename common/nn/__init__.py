"""Networks and what is built from them: layers, the network registry, policies, distributions, observation encoding, exported policy graphs and TensorFlow helpers."""

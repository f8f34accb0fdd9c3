"""Adam's gradient scale against its epsilon in a saved deepq-family model:
`.venv/bin/python bench/adam_scale.py MODEL.zip [MODEL.zip ...]`.

For each online-network weight array, prints the 10th, 50th and 90th percentiles of sqrt(v), Adam's running
root mean square of that weight's gradient, beside the run's `adam_epsilon`. Where sqrt(v) is well under epsilon,
Adam's step `lr * m / (sqrt(v) + epsilon)` is about `lr / epsilon` times the gradient: plain gradient descent at
a small rate rather than Adam's step of about `lr`.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from common.files.model_file import load_model_file

ONLINE_PREFIX = "q/"  # the online Q-network's arrays, in the order Adam's per-weight state follows


def report(path: str) -> None:
    """Print one model file's table."""
    metadata, arrays = load_model_file(path)
    epsilon = metadata.get("hyperparameters", {}).get("adam_epsilon")
    names = [k for k in arrays if k.startswith(ONLINE_PREFIX)]
    moments = [k for k in arrays if k.startswith("adam/v")]
    print(f"{path}: {metadata.get('algorithm')}, {metadata.get('num_timesteps')} steps, adam_epsilon {epsilon}")
    if len(names) != len(moments):
        print(f"  {len(names)} online weight arrays but {len(moments)} Adam moments: not a deepq-family model")
        return
    print(f"  {'weight':32s} {'shape':>14s} {'sqrt(v) p10':>12s} {'p50':>10s} {'p90':>10s}")
    for i, name in enumerate(names):
        root = np.sqrt(arrays[f"adam/v{i}"])
        if root.shape != arrays[name].shape:
            print(f"  {name}: Adam's state has shape {root.shape}, the weight {arrays[name].shape}")
            return
        p10, p50, p90 = np.percentile(root, [10, 50, 90])
        print(f"  {name:32s} {root.shape!s:>14s} {p10:12.2e} {p50:10.2e} {p90:10.2e}")


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: bench/adam_scale.py MODEL.zip [MODEL.zip ...]")
    for path in sys.argv[1:]:
        report(path)


if __name__ == "__main__":
    main()

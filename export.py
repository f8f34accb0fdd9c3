"""Export a trained policy: ``python -m export MODEL_FILE --format=saved_model|tflite|onnx --out=PATH``.

The exported function maps a batch of raw env observations to env actions, deterministically, with the
model's preprocessing inside (VecNormalize statistics, image scaling, Dict/Discrete encoding, Box
bounds): see ``common.nn.policy_export``. It runs with TensorFlow alone (SavedModel), the TFLite
interpreter alone, or onnxruntime alone, without this project. ``--extra_outputs`` adds the value
estimate and action probabilities or Q-values where the algorithm has them; ``--action_mask`` an input
``action_mask`` (the action is then the best legal one; without it an exported policy ignores masks). ONNX needs
``pip install -r requirements-export.txt``. A user mistake (unknown format, unwritable path, a file
that is no model of this project) ends with one line ``export: error: ...`` and exit status 2.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from common.process import startup

startup.quiet_tensorflow()  # before anything imports TensorFlow: no start-up chatter unless --verbose

from common.errors import UserError
from run_util import check_writable_dir, check_writable_file
from runner.process_exit import exit_skipping_teardown

FORMAT_NAMES = ("saved_model", "tflite", "onnx")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, as every user error of this project
        raise UserError(f"{message} (see --help)")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line, with the format and the output path checked."""
    p = _Parser(prog="export", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("model_file", help="a model file saved by the runner (--save_path)")
    p.add_argument("--format", required=True, help="saved_model (a folder), tflite or onnx (a file)")
    p.add_argument("--out", required=True, help="where to write the exported policy")
    p.add_argument("--extra_outputs", action="store_true",
                   help="also output the value estimate and action probabilities or Q-values")
    p.add_argument("--action_mask", action="store_true",
                   help="add the input action_mask (bool [batch, actions]): the action is the best legal one "
                        "(Discrete and MultiDiscrete policies of ppo2, a2c, trpo, deepq); without it masks are ignored")
    p.add_argument("--network", default=None, help="your own network (module:builder) when the file names one")
    p.add_argument("--verbose", action="store_true", help="show TensorFlow's start-up and converter logs")
    args = p.parse_args(list(argv))
    if args.format not in FORMAT_NAMES:
        raise UserError(f"unknown format {args.format!r}; use one of {', '.join(FORMAT_NAMES)}")
    if args.format == "saved_model":
        args.out = os.path.abspath(os.path.expanduser(args.out))
        if os.path.lexists(args.out) and not os.path.isdir(args.out):
            raise UserError(f"--out {args.out} is a file; a SavedModel is a folder: give a folder name")
        check_writable_dir(os.path.dirname(args.out), "--out")
    else:
        args.out = check_writable_file(args.out, "--out")
    if not os.path.isfile(args.model_file):
        raise UserError(f"{args.model_file}: no such model file")
    if os.path.exists(args.out) and os.path.samefile(args.out, args.model_file):
        raise UserError(f"--out {args.out} is the model file itself; give another name")
    return args


def export_model(model: Any, fmt: str, out: str, extra_outputs: bool = False, action_mask: bool = False) -> Any:
    """Write ``model``'s deterministic policy to ``out`` in format ``fmt`` (checked after writing) and
    return the ``ExportedPolicy``; ``ExportError`` when the model's algorithm cannot be exported (or, with
    ``action_mask``, cannot take a mask). A model with bfloat16 networks computes in float32 from then on."""
    from common.nn.export_formats import FORMATS, ExportError
    from common.nn.policy_export import ExportedPolicy

    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    from common.nn.networks import use_float32_compute

    use_float32_compute(model)  # the float32 weights, computed in float32 (bfloat16 is a training speed-up)
    try:
        graph = model.policy_graph()
    except NotImplementedError:
        raise ExportError(f"{model.algorithm} models cannot be exported yet (its model has no policy_graph())") from None
    if action_mask and not graph.masked:
        raise ExportError(f"--action_mask: this {model.algorithm} policy (action space {model.action_space}) takes "
                          "no action mask; masks need a Discrete or MultiDiscrete policy")
    policy = ExportedPolicy(graph, model.observation_space, model.action_space, model.normalization_state(),
                            extra_outputs, action_mask)
    FORMATS[fmt](policy, out)
    return policy


def artifact_size(path: str) -> int:
    """Bytes of an exported file, or of every file in a SavedModel folder."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def _run(argv: Sequence[str]) -> Any:
    args = parse_args(argv)
    from algos.base import load_model

    model = load_model(args.model_file, network=args.network)
    policy = export_model(model, args.format, args.out, args.extra_outputs, args.action_mask)
    outputs = sorted(policy.act.get_concrete_function().structured_outputs)
    print(f"export: {model.algorithm} policy written to {args.out} ({args.format}, {artifact_size(args.out)} bytes); "
          f"inputs {', '.join(policy.input_names)}; outputs {', '.join(outputs)}")
    return policy


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; 0 when written, 2 (one line on stderr) for a user error. With ``argv``
    given (from Python) errors are raised instead."""
    if argv is not None:
        _run(argv)
        return 0
    try:
        _run(sys.argv[1:])
    except UserError as e:
        text = str(e).strip().splitlines() or [type(e).__name__]
        print(f"export: error: {text[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    exit_skipping_teardown(main())  # the files are written: skip the interpreter's and TensorFlow's teardown

"""Writing an ``ExportedPolicy`` as a SavedModel folder, a TFLite file or an ONNX file, each checked.

Every writer works in a temporary path beside the target and renames it into place, so a failed export
never leaves half a file. After writing, the artifact is loaded back with its own runtime (TensorFlow,
the TFLite interpreter, onnxruntime) and must give the TF function's outputs on sampled observations.
ONNX needs the optional ``requirements-export.txt`` (tf2onnx, onnxruntime).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from common.errors import UserError
from common.nn.policy_export import ExportedPolicy
from common.process.startup import quiet_native_logs

ONNX_OPSET = 17
INSTALL_HINT = "pip install -r requirements-export.txt"
CHECK_BATCH = 64


class ExportError(UserError):
    """An export that cannot be made as asked (format, path, missing optional package)."""


def write_saved_model(policy: ExportedPolicy, out: str) -> None:
    """A SavedModel folder: ``tf.saved_model.load(out).signatures["serving_default"](obs=...)``."""
    replaceable = (os.path.isdir(out) and not os.path.islink(out)
                   and (not os.listdir(out) or os.path.isfile(os.path.join(out, "saved_model.pb"))))
    if os.path.lexists(out) and not replaceable:
        raise ExportError(f"{out} exists and is neither empty nor a SavedModel folder; remove it or give another --out")
    tmp = tempfile.mkdtemp(prefix=".tmp-export-", dir=os.path.dirname(out))
    try:
        tf.saved_model.save(policy, tmp, signatures={"serving_default": policy.concrete_function()})
        loaded = tf.saved_model.load(tmp).signatures["serving_default"]
        _check(policy, lambda feed: {k: v.numpy() for k, v in loaded(**feed).items()}, "SavedModel")
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def tflite_bytes(policy: ExportedPolicy) -> bytes:
    """The policy as a TFLite flatbuffer (float32, TFLite builtin ops only)."""
    converter = tf.lite.TFLiteConverter.from_concrete_functions([policy.concrete_function()], policy)
    return converter.convert()


def write_tflite(policy: ExportedPolicy, out: str) -> None:
    """A TFLite file: ``tf.lite.Interpreter(model_path=out).get_signature_runner()(obs=...)``."""
    data = tflite_bytes(policy)
    with warnings.catch_warnings():  # TF's own interpreter is deprecated for ai_edge_litert's (same API)
        warnings.simplefilter("ignore")
        with quiet_native_logs():  # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." (first call)
            runner = tf.lite.Interpreter(model_content=data).get_signature_runner()
            _check(policy, lambda feed: runner(**feed), "TFLite")
    _write_bytes(out, data)


def onnx_bytes(policy: ExportedPolicy) -> bytes:
    """The policy as an ONNX model (tf2onnx); ExportError naming the install line when it is missing."""
    try:
        import tf2onnx
    except ImportError:
        raise ExportError(f"ONNX export needs tf2onnx and onnxruntime: {INSTALL_HINT}") from None
    proto, _ = tf2onnx.convert.from_function(policy.act, input_signature=policy.act.input_signature,
                                             opset=ONNX_OPSET)
    return proto.SerializeToString()


def write_onnx(policy: ExportedPolicy, out: str) -> None:
    """An ONNX file: ``onnxruntime.InferenceSession(out).run(None, {"obs": ...})``."""
    data = onnx_bytes(policy)
    try:
        import onnxruntime
    except ImportError:
        raise ExportError(f"ONNX export needs tf2onnx and onnxruntime: {INSTALL_HINT}") from None
    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    _check(policy, lambda feed: dict(zip(names, session.run(None, feed))), "ONNX")
    _write_bytes(out, data)


FORMATS: dict[str, Callable[[ExportedPolicy, str], None]] = {
    "saved_model": write_saved_model,
    "tflite": write_tflite,
    "onnx": write_onnx,
}


def _write_bytes(out: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-export-", dir=os.path.dirname(out))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _check(policy: ExportedPolicy, run: Callable[[dict], dict], what: str) -> None:
    """The artifact's outputs must be the TF function's on a batch of sampled inputs (else a bug: an
    AssertionError with the converter's difference)."""
    feed = policy.sample_inputs(CHECK_BATCH, seed=0)
    expected = {k: v.numpy() for k, v in policy.act(*feed.values()).items()}
    got = run(feed)
    assert set(got) == set(expected), f"{what} outputs {sorted(got)}, expected {sorted(expected)}"
    for name, want in expected.items():
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-5, err_msg=f"{what} {name}")
        else:
            np.testing.assert_array_equal(got[name], want, err_msg=f"{what} {name}")

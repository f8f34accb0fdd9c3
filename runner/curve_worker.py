"""A helper process that imports matplotlib while a run starts and draws its learning curve at the end.

Drawing ``learning_curve.png`` in the runner's own process means importing matplotlib after training, on the
critical path of every run (about 0.6 s on a quiet 2-core machine, more under load). Started before TensorFlow's
import, the helper does that import on another core; ``draw`` then costs only the drawing. Whenever the helper
cannot answer (it failed to start, died, or timed out), ``draw`` returns ``FAILED`` and the caller draws
in-process as before, so a curve is never lost to it.

The helper reads one line (an absolute log folder) from stdin, draws, and writes one JSON line: ``{"path": P}``
(P may be null: no finished episode yet) or ``{"warning": W}`` (the ImportError, OSError or ValueError the
in-process drawing would have reported). End of input without a line (the run failed, or was killed) makes it
exit. It runs in a session of its own so that a Ctrl-C meant for the run does not reach it.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAILED = object()  # ``draw``'s answer when the helper could not draw: draw in-process instead


class CurveWorker:
    """The helper process (``None`` inside when it could not be started)."""

    def __init__(self) -> None:
        code = f"import sys; sys.path.insert(0, {ROOT!r}); from runner.curve_worker import serve; serve()"
        try:
            self._proc: subprocess.Popen | None = subprocess.Popen(
                [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        except OSError:
            self._proc = None

    def draw(self, log_dir: str, timeout: float = 300.0) -> object:
        """``{"path": ...}`` or ``{"warning": ...}`` from the helper for ``log_dir``, or ``FAILED``."""
        proc, self._proc = self._proc, None
        if proc is None:
            return FAILED
        try:
            out, _ = proc.communicate(os.path.abspath(log_dir) + "\n", timeout=timeout)
            answer = json.loads(out.strip().splitlines()[-1]) if proc.returncode == 0 and out.strip() else None
        except (OSError, ValueError, subprocess.TimeoutExpired):
            answer = None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return answer if isinstance(answer, dict) else FAILED

    def close(self) -> None:
        """Stop the helper unused, at once (it has written nothing; a run that failed early must not wait for
        its imports)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.kill()
        proc.wait()
        with contextlib.suppress(OSError):
            proc.stdin.close()
            proc.stdout.close()


def serve() -> None:
    """The helper's side: import matplotlib's drawing modules and draw once unseen (fonts, renderer), wait for
    a folder, draw its curve, answer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.backends.backend_agg  # what savefig uses for PNG
    import matplotlib.figure

    from common.logs.plot_util import warm_up

    warm_up()
    line = sys.stdin.readline()
    if not line.strip():
        return
    sys.stdout.write(json.dumps(draw_here(line.strip())) + "\n")


def draw_here(log_dir: str) -> dict[str, str | None]:
    """Draw ``log_dir``'s curve in this process: ``{"path": P}`` (None: no finished episode yet) or, when it
    cannot be drawn, ``{"warning": W}``."""
    from common.logs.plot_util import write_final_curve

    try:
        return {"path": write_final_curve(log_dir)}
    except (ImportError, OSError, ValueError) as e:
        return {"warning": str(e)}

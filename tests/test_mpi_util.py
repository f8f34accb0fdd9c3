"""Tests of common.mpi.mpi_util: no-op behaviour without a launcher, and real collectives under mpiexec."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from common.mpi import mpi_util
from common.mpi.mpi_launch import MPI_ENV_PREFIXES, launched_by_mpi, launcher_local_size
from common.running_mean_std import RunningMeanStd

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "tests" / "mpi_scripts"
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
needs_mpiexec = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found next to python or on PATH "
                                                           "(pip install mpich mpi4py)")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any MPI launcher variables, plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(MPI_ENV_PREFIXES)}
    env.update(extra)
    return env


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=clean_env(**env),
                          capture_output=True, text=True, timeout=60, check=False)


def run_mpiexec(n: int, script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    cmd = [MPIEXEC, "-n", str(n), sys.executable, str(SCRIPTS / script), *args]
    return subprocess.run(cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_single_process_never_imports_mpi4py():
    out = run_python("""
        import sys
        import numpy as np
        from common.mpi import mpi_util as m
        from common.running_mean_std import RunningMeanStd
        assert (m.rank(), m.size(), m.is_root(), m.get_comm()) == (0, 1, True, None)
        m.barrier()
        m.allreduce_mean(np.ones(3)); m.allreduce_sum(np.ones(3)); m.broadcast_arrays([np.ones(2)])
        m.mpi_moments(np.ones((4, 2))); m.weighted_mean({"a": (1.0, 2)})
        m.combine_running_mean_std(RunningMeanStd())
        assert "mpi4py" not in sys.modules, "mpi4py was imported without a launcher"
        print("no-import ok")
    """)
    assert out.returncode == 0, out.stderr
    assert "no-import ok" in out.stdout


def test_launcher_with_one_process_does_not_need_mpi4py():
    out = run_python("""
        import sys
        sys.modules["mpi4py"] = None  # any import of mpi4py now fails
        from common.mpi import mpi_util as m
        assert (m.rank(), m.size()) == (0, 1)
        print("size-1 ok")
    """, PMI_RANK="0", PMI_SIZE="1")
    assert out.returncode == 0, out.stderr
    assert "size-1 ok" in out.stdout


def test_launcher_with_several_processes_but_no_mpi4py_fails_clearly():
    out = run_python("""
        import sys
        sys.modules["mpi4py"] = None
        from common.mpi import mpi_util as m
        try:
            m.size()
        except m.MpiUnavailableError as exc:
            print("error:", exc)
    """, PMI_RANK="0", PMI_SIZE="2", PMI_FD="99")
    assert out.returncode == 0, out.stderr
    assert "error: started by mpiexec with 2 processes but mpi4py cannot be imported" in out.stdout


@pytest.mark.parametrize("env, expected", [
    ({}, False), ({"PATH": "/bin", "SLURM_PROCID": "0"}, False), ({"PMI_RANK": "1", "PMI_SIZE": "2"}, True),
    ({"OMPI_COMM_WORLD_SIZE": "4"}, True), ({"PMIX_RANK": "0"}, True), ({"MPI_LOCALNRANKS": "2"}, True),
])
def test_launched_by_mpi_reads_launcher_variables(env, expected):
    assert launched_by_mpi(env) is expected


@pytest.mark.parametrize("env, expected", [
    ({}, None), ({"PMI_SIZE": "4"}, None), ({"MPI_LOCALNRANKS": "2"}, 2), ({"OMPI_COMM_WORLD_LOCAL_SIZE": "3"}, 3),
    ({"MV2_COMM_WORLD_LOCAL_SIZE": "x"}, None),
])
def test_launcher_local_size_reads_the_processes_on_this_host(env, expected):
    assert launcher_local_size(env) == expected


@pytest.mark.skipif(launched_by_mpi(), reason="pytest itself runs under an MPI launcher")
def test_single_process_collectives_return_copies_of_inputs():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for fn in (mpi_util.allreduce_sum, mpi_util.allreduce_mean):
        y = fn(x)
        assert y is not x and y.dtype == np.float32
        np.testing.assert_array_equal(y, x)
    assert mpi_util.allreduce_mean(np.array([1, 2])).dtype == np.float64
    arrays = [x, np.array(3)]
    got = mpi_util.broadcast_arrays(arrays)
    assert all(g is not a and g.tobytes() == a.tobytes() for g, a in zip(got, arrays, strict=True))
    data = np.random.default_rng(0).normal(size=(50, 2))
    mean, std, count = mpi_util.mpi_moments(data)
    np.testing.assert_allclose(mean, data.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std, data.std(axis=0), rtol=1e-12)
    assert count == 50
    assert mpi_util.weighted_mean({"a": (0.1, 3), "b": ("text", 1)}) == {"a": 0.1, "b": "text"}
    rms = RunningMeanStd(shape=(2,))
    rms.update(data)
    before = (rms.mean.copy(), rms.var.copy(), rms.count)
    mpi_util.combine_running_mean_std(rms)
    assert rms.count == before[2] and np.all(rms.mean == before[0]) and np.all(rms.var == before[1])
    assert mpi_util.setup_process_seed(3) == 3 and mpi_util.setup_process_seed(None) is None


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(TypeError, match="integer or float array"):
        mpi_util.allreduce_mean(np.array(["a"]))
    with pytest.raises(ValueError, match="root 1 is not a rank"):
        mpi_util.broadcast_arrays([np.ones(2)], root=1)
    with pytest.raises(ValueError, match="at least one axis"):
        mpi_util.mpi_moments(np.float64(1.0))
    with pytest.raises(ValueError, match="no samples"):
        mpi_util.mpi_moments(np.empty((0, 3)))
    with pytest.raises(ValueError, match="counts must be >= 0"):
        mpi_util.weighted_mean({"a": (1.0, -1)})


@pytest.mark.mpi
@needs_mpiexec
@pytest.mark.parametrize("n", [2, 3])
def test_collectives_under_mpiexec_match_numpy(n):
    out = run_mpiexec(n, "collectives.py")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"collectives ok on {n} ranks" in out.stdout


@pytest.mark.mpi
@needs_mpiexec
@pytest.mark.parametrize("mode, code", [("uncaught", 1), ("exit", 3)])
def test_failing_rank_aborts_the_job_instead_of_hanging(mode, code):
    out = run_mpiexec(2, "failure.py", mode, timeout=20)
    assert out.returncode == code, out.stdout + out.stderr
    assert "rank 0 was not aborted" not in out.stdout


@pytest.mark.mpi
@needs_mpiexec
def test_a_signal_ends_a_wait_for_a_rank_that_never_joins(tmp_path):
    proc = subprocess.Popen([MPIEXEC, "-n", "2", sys.executable, str(SCRIPTS / "interrupt.py"), str(tmp_path)],
                            cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid_file, deadline = tmp_path / "rank0.pid", time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(0.3)  # rank 0 is waiting in the barrier by now
    os.kill(int(pid_file.read_text()), signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert "rank 0 interrupted in the barrier by SIGTERM" in out, out + err


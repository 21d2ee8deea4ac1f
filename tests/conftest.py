import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# --- GPU-marked tests: real CuPy when a GPU is there, else the CPU stand-in (tests/fake_cupy)
import functools  # noqa: E402
import os  # noqa: E402

import pytest  # noqa: E402

STANDIN_DIR = str(Path(__file__).resolve().parent / "fake_cupy")


def pytest_sessionstart(session):
    """Byte-compile the package, the tests and experiments/ once, before any rank starts.

    Where PYTHONDONTWRITEBYTECODE is set (this machine sets it), Python never caches what it
    compiles, so every rank of every launched job compiled mpicomm's ~140 modules afresh:
    0.55 CPU-seconds per process, against 0.29 with the bytecode there (``python -m mpicomm
    bench --help``, 2026-12-03). Python still reads a cache it finds; compileall writes one."""
    import compileall

    root = Path(__file__).resolve().parents[1]
    for folder in ("mpicomm", "tests", "experiments"):
        compileall.compile_dir(root / folder, quiet=2)


def pytest_sessionfinish(session, exitstatus):
    """This process ran MPI as a singleton wherever a test imported mpi4py: under Open MPI
    it would leave its 16 MB segment in /dev/shm (``core.segments.release_singleton``)."""
    from mpicomm.core.segments import release_singleton

    release_singleton()


SLOW_FROM_RANKS = 3  # an MPI test at this many ranks or more belongs to the slow tier


def pytest_collection_modifyitems(config, items):
    """The tiers' one rule for rank counts: a test parametrized with ``nranks`` >= 3 is slow
    (the default tier checks every case at 1-2 ranks; CI's slow step runs the rest)."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        n = params.get("nranks")
        if isinstance(n, int) and n >= SLOW_FROM_RANKS:
            item.add_marker(pytest.mark.slow)


def pytest_addoption(parser):
    parser.addoption(
        "--gpu-backend", choices=("auto", "real", "standin"), default="auto",
        help="CuPy for @pytest.mark.gpu tests: real CuPy on a GPU, the NumPy stand-in in "
             "tests/fake_cupy, or auto (real when a GPU is usable, else the stand-in; "
             "MPICOMM_CUPY_STANDIN=0 makes auto skip instead)")


@functools.cache
def real_cupy_usable() -> bool:
    """True when a real CuPy (not the stand-in) finds a CUDA device."""
    try:
        import cupy

        return not getattr(cupy, "STANDIN", False) and cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no cupy, no driver, no device
        return False


@pytest.fixture(autouse=True)
def gpu_backend(request, monkeypatch):
    """For gpu-marked tests: "real" or "standin" (MPI jobs then import tests/fake_cupy as
    cupy: run_mpi puts it on PYTHONPATH via MPICOMM_CUPY_STANDIN); skip when neither."""
    if request.node.get_closest_marker("gpu") is None:
        return None
    want = request.config.getoption("--gpu-backend")
    if want != "standin" and real_cupy_usable():
        return "real"
    if want == "real":
        pytest.fail("--gpu-backend real: CuPy is missing or finds no CUDA device")
    if want == "auto" and os.environ.get("MPICOMM_CUPY_STANDIN") == "0":
        pytest.skip("needs CuPy and a CUDA GPU (stand-in disabled: MPICOMM_CUPY_STANDIN=0)")
    monkeypatch.setenv("MPICOMM_CUPY_STANDIN", STANDIN_DIR)
    return "standin"


# --- the device model in this process: what cli.main installs for --clock virtual --accelerator
@pytest.fixture
def device_model():
    """``device_model(name)``: a virtual clock (no per-call overhead, no least charge) and the
    named device model installed in this process; returns the clock. Both reset after."""
    from mpicomm.core import clock, flops
    from mpicomm.core.clock import VirtualClock
    from mpicomm.costmodel.device import device

    def install(name: str) -> VirtualClock:
        vc = VirtualClock(1.0, least=False, overhead=0.0)
        clock.set_source(vc.now, "virtual")
        flops.use(device(name))
        return vc

    try:
        yield install
    finally:
        flops.reset()
        clock.reset()

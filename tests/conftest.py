"""Shared test settings: a reusable kernel cache and hypothesis profiles."""
import contextlib
import importlib.util
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Compiled kernels are reused across test runs through the disk cache (gitignored).
os.environ.setdefault("NBACCEL_CACHE_DIR", str(ROOT / ".nbaccel-cache" / "tests"))
# strict: a fault inside the compiler fails the test instead of quietly running eagerly (or
# the cell plainly); tests of the fallbacks set nb.config["strict"] = False
os.environ.setdefault("NBACCEL_STRICT", "1")
# Without CuPy (no GPU) Triton kernels are tested through Triton's interpreter, which must be
# switched on before triton is first imported (by any test module)
if importlib.util.find_spec("cupy") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("NBACCEL_TRITON_INTERPRET", "1")   # backend="triton" runs them there

try:
    from hypothesis import HealthCheck, settings

    # make test: a fixed, reproducible set of examples (a red CI is never a dice roll);
    # make fuzz explores new ones
    settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("fuzz", max_examples=int(os.environ.get("NBACCEL_FUZZ_EXAMPLES", "2000")),
                              deadline=None, suppress_health_check=list(HealthCheck))
    settings.load_profile("fuzz" if os.environ.get("NBACCEL_FUZZ_EXAMPLES") else "ci")
except ImportError:  # pragma: no cover
    pass


@pytest.fixture(autouse=True)
def _restore_config():
    """A test that changes nb.config (a magic's `config ...` line) leaves it as it found it."""
    import copy
    import nbaccel
    saved = copy.deepcopy(nbaccel.compiler.config)
    yield
    nbaccel.compiler.config.clear()
    nbaccel.compiler.config.update(saved)


@pytest.fixture(scope="session", autouse=True)
def _cells_compile_on_their_first_run():
    """A %%compile cell's first run is plain by default (compiler/replay/decision.py: it compiles once
    its plain runs have cost what compiling would). A plain run is the plain cell: the contract
    holds by construction. The suite tests the compiled path, so its cells compile on their
    first run, as ``%%compile --now`` does; the tests of the default policy set it themselves
    (tests/test_cheap_path.py, tests/test_decision.py)."""
    import nbaccel
    nbaccel.config["cell_first_run"] = "compiled"
    yield


@pytest.fixture
def not_strict(monkeypatch):
    """nb.config["strict"] off for one test: what a user sees, the eager fallback and the
    %%compile safety net's plain re-run included (the cell-contract and surface tests)."""
    import nbaccel
    monkeypatch.setitem(nbaccel.config, "strict", False)


@pytest.fixture(params=["kernel", "numpy"])
def fused_path(request):
    """Force one eager path of the fused ops (tests/test_fused_ops.py and their compiled
    twins): the loaded numba kernels, or none (the NumPy fallback that runs while they load)."""
    from nbaccel.ops import kernel_modules
    module = kernel_modules.load_now("fused") if request.param == "kernel" else None
    if request.param == "kernel" and module is None:
        pytest.skip("numba kernels unavailable")
    prev = kernel_modules.set_eager_kernels("fused", module)
    yield request.param
    kernel_modules.set_eager_kernels("fused", prev)


@contextlib.contextmanager
def _fused_kernel_calls():
    """The names of the fused kernels called inside (the real kernels run, seen through a
    proxy); skips the test where numba's kernels cannot load."""
    from nbaccel.ops import kernel_modules
    real = kernel_modules.load_now("fused")
    if real is None:
        pytest.skip("numba kernels unavailable")
    called = []

    class Spy:
        def __getattr__(self, name):
            called.append(name)
            return getattr(real, name)

    prev = kernel_modules.set_eager_kernels("fused", Spy())
    try:
        yield called
    finally:
        kernel_modules.set_eager_kernels("fused", prev)


@pytest.fixture
def fused_kernel_calls():
    """``with fused_kernel_calls() as called:``: which fused kernels the block called."""
    return _fused_kernel_calls


@pytest.fixture(autouse=True)
def _seed():
    import nbaccel
    nbaccel.manual_seed(0)
    yield


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` skip cleanly where CuPy finds no GPU (see docs/gpu.md)."""
    gpu_items = [it for it in items if it.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    from nbaccel.gpu.placement import gpu_available
    ok, why = gpu_available()
    if not ok:
        skip = pytest.mark.skip(reason=f"needs an NVIDIA GPU with CuPy: {why}")
        for it in gpu_items:
            it.add_marker(skip)


@pytest.fixture
def compiled_runs_only():
    """Every nb.compile call runs compiled (no plain run chosen by timing, which would hide a
    wrong compiled result)."""
    from nbaccel.compiler.config import config
    saved = config["decide_functions"]
    config["decide_functions"] = False
    yield
    config["decide_functions"] = saved

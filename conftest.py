"""Repository-wide pytest settings (tests/ and the nbval-checked notebooks/)."""
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent
# A reusable kernel cache for tests and notebook kernels (gitignored).
os.environ.setdefault("NBACCEL_CACHE_DIR", str(ROOT / ".nbaccel-cache" / "tests"))

_saved = {}


def pytest_runtest_setup(item):
    # Notebook kernels start during their first cell's setup and inherit this environment:
    # stable report text (no wall-clock numbers) so nbval compares outputs exactly.
    if str(item.fspath).endswith(".ipynb"):
        _saved.setdefault("v", os.environ.get("NBACCEL_STABLE_OUTPUT"))
        os.environ["NBACCEL_STABLE_OUTPUT"] = "1"


def pytest_runtest_teardown(item):
    if str(item.fspath).endswith(".ipynb") and "v" in _saved:
        v = _saved.pop("v")
        if v is None:
            os.environ.pop("NBACCEL_STABLE_OUTPUT", None)
        else:
            os.environ["NBACCEL_STABLE_OUTPUT"] = v

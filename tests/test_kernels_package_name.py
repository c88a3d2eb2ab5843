"""nbaccel_kernels refuses to be imported under its folder's name, "kernels" (importable from
the repository's root): numba's disk cache, beside the source and shared by every process,
would record that module name, and later processes, which import nbaccel_kernels, could not
load the cached kernels, so the eager ops silently kept their NumPy paths (seen: float32 GELU
100x slower in scripts run outside the repository after one `python -c "from kernels..."`)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code):
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_importing_the_folder_name_is_refused():
    res = _run("import kernels.fused.cpu")
    assert res.returncode != 0
    assert "ImportError: import this package as nbaccel_kernels" in res.stderr


def test_the_package_name_imports():
    res = _run("import nbaccel_kernels.fused.cpu as m; print(m.__name__)")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "nbaccel_kernels.fused.cpu"

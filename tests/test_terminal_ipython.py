"""Terminal IPython (the real `ipython` binary, in a subprocess): %%compile prints a text report."""
import os
import pathlib
import subprocess
import sys

import pytest

IPYTHON = pathlib.Path(sys.executable).parent / "ipython"

SESSION = """\
%load_ext nbaccel
import numpy as np
x = np.ones((64, 64), np.float32)
%%compile --backend numpy
s = x - x.max(axis=1, keepdims=True)
p = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
p.sum()


print("result", type(p).__name__, p.dtype, p.shape)
x = np.ones((128, 64), np.float32)
%%compile --backend numpy
s = x - x.max(axis=1, keepdims=True)
p = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
p.sum()


%nbaccel status
exit
"""


def _run(tmp_path, stable):
    env = dict(os.environ, NBACCEL_CACHE_DIR=str(tmp_path / "cache"), TERM="dumb")
    env["NBACCEL_STABLE_OUTPUT"] = "1" if stable else "0"
    proc = subprocess.run([str(IPYTHON), "--simple-prompt", "--no-banner", "--colors=NoColor",
                           "--HistoryManager.enabled=False"], input=SESSION, text=True,
                          capture_output=True, env=env, timeout=120, cwd=tmp_path)
    return proc.stdout + proc.stderr


@pytest.mark.skipif(not IPYTHON.exists(), reason="no ipython binary beside the interpreter")
def test_terminal_prints_text_report(tmp_path):
    out = _run(tmp_path, stable=False)
    assert "nbaccel · In[" in out
    assert "(amax, subtract, exp, sum, divide)  cpu/numpy" in out    # softmax: one kernel
    assert "Out[" in out and "np.float32(64.0)" in out
    assert "result ndarray float32 (64, 64)" in out
    assert "recompiles (1):" in out and "x.shape[0]" in out
    assert "compile " in out and "cache miss" in out          # timings in the normal mode
    assert "nbaccel status · 1 compiled cell" in out and "backends:" in out
    assert "Traceback" not in out


@pytest.mark.skipif(not IPYTHON.exists(), reason="no ipython binary beside the interpreter")
def test_terminal_stable_output_has_no_timings(tmp_path):
    out = _run(tmp_path, stable=True)
    assert "nbaccel · In[" in out and "(amax, subtract, exp, sum, divide)" in out
    assert " µs" not in out and " ms" not in out and "cache miss" not in out

"""nbaccel/heap.py: after ``import nbaccel`` (glibc), arrays made and freed again and again reuse
the heap's memory instead of faulting fresh pages in every time, as an eager step's arrays do."""
import os
import subprocess
import sys

import pytest

from nbaccel import heap

# 24 arrays of 1 MiB made and freed five times; minor page faults of the last five rounds
_CHURN = """
import resource, sys
import numpy as np
if sys.argv[1] == "nbaccel":
    import nbaccel
def churn():
    xs = [np.ones(1 << 18, np.float32) for _ in range(24)]
    del xs
churn(); churn()
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    churn()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
"""

glibc_only = pytest.mark.skipif(not sys.platform.startswith("linux") or not heap._glibc(),
                                reason="the thresholds are glibc's")


def _faults(what, **env):
    clean = {k: v for k, v in os.environ.items()
             if k not in heap._USER_VARS and k != "NBACCEL_MALLOC"}
    out = subprocess.run([sys.executable, "-c", _CHURN, what], env={**clean, **env},
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


@glibc_only
def test_freed_arrays_memory_is_reused_after_import():
    # 5 rounds x 24 MiB: about 30,000 faults with glibc's defaults (the heap top is trimmed
    # after each round), none once the memory stays
    assert _faults("numpy") > 5_000
    assert _faults("nbaccel") < 500


@glibc_only
def test_the_users_choice_and_the_opt_out_keep_glibcs_behaviour():
    assert _faults("nbaccel", NBACCEL_MALLOC="default") > 5_000
    assert _faults("nbaccel", MALLOC_TRIM_THRESHOLD_="131072") > 5_000


def test_configure_skips_when_the_user_chose(monkeypatch):
    monkeypatch.setattr(heap, "_applied", None)
    assert heap.configure({"MALLOC_MMAP_THRESHOLD_": "65536"}) is False
    monkeypatch.setattr(heap, "_applied", None)
    assert heap.configure({"NBACCEL_MALLOC": "default"}) is False

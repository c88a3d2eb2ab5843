"""Start-up: ``import nbaccel`` loads nothing heavy; heavy packages load on first use.

Each check runs in a fresh interpreter (``sys.modules`` of this test process already holds
everything the other tests imported).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("ml_dtypes", "numba", "llvmlite", "triton", "cupy", "torch")


def _fresh(code: str) -> dict:
    """Run ``code`` in a new interpreter; it prints one JSON line, returned here."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _loaded(names) -> str:
    return (f"[m for m in {tuple(names)!r} "
            "if m in sys.modules or any(k.startswith(m + '.') for k in sys.modules)]")


def test_import_nbaccel_loads_no_heavy_package():
    got = _fresh("import sys, json\nbefore = set(sys.modules)\nimport nbaccel\n"
                 "new = set(sys.modules) - before\n"
                 f"print(json.dumps(sorted({{m.split('.')[0] for m in new}} & set({HEAVY!r}))))")
    assert got == []


def test_bfloat16_loads_ml_dtypes_when_first_needed():
    got = _fresh("import sys, json\nimport nbaccel as nb\n"
                 "d = nb.bfloat16\n"
                 "facts = [d.name, d.itemsize, d.is_floating_point, str(nb.result_type(d, nb.int8))]\n"
                 f"before = {_loaded(['ml_dtypes'])}\n"
                 "x = nb.arange(4, dtype=nb.float32).astype(nb.bfloat16)\n"
                 "print(json.dumps({'facts': facts, 'before': before, "
                 f"'after': {_loaded(['ml_dtypes'])}, "
                 "'values': x.float().tolist(), 'dtype': str(x.dtype), "
                 "'np': str(x.numpy().dtype), 'eps': nb.finfo(nb.bfloat16).eps}))")
    assert got["facts"] == ["bfloat16", 2, True, "bfloat16"]
    assert got["before"] == [] and got["after"] == ["ml_dtypes"]
    assert got["values"] == [0.0, 1.0, 2.0, 3.0] and got["dtype"] == "bfloat16"
    assert got["np"] == "bfloat16" and got["eps"] == 2.0 ** -7


def test_a_bfloat16_array_made_outside_nbaccel_is_recognised():
    # the user imported ml_dtypes and made the array: nbaccel's dtype lookup must know it
    got = _fresh("import json, ml_dtypes, numpy as np\nimport nbaccel as nb\n"
                 "a = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)\n"
                 "t = nb.asarray(a)\n"
                 "print(json.dumps([str(t.dtype), t.dtype is nb.bfloat16, "
                 "nb.dtypes.dtype(a.dtype) is nb.bfloat16, (t * 2).float().tolist()]))")
    assert got == ["bfloat16", True, True, [3.0, -4.0]]


def test_load_ext_leaves_ml_dtypes_and_numba_to_first_use():
    """`%load_ext nbaccel` (the compiler's call path) imports neither ml_dtypes (0.56 s here)
    nor numba (0.2 s) on the notebook's thread; numba loads with the first kernel or the
    background warm-up."""
    pytest.importorskip("IPython")
    got = _fresh("import sys, json\nfrom IPython.testing.globalipapp import start_ipython\n"
                 "import nbaccel\nnbaccel.config['numba_warmup'] = False\n"
                 "ip = start_ipython()\nip.run_line_magic('load_ext', 'nbaccel')\n"
                 f"print(json.dumps({_loaded(['ml_dtypes', 'numba', 'llvmlite'])}))")
    assert got == []


def test_a_compiled_cell_with_no_report_leaves_the_widget_unloaded():
    """nbaccel_ext (anywidget, ipywidgets: ~0.1-0.16 s to import) loads when a report or a
    progress indicator is shown, not for a compiled cell whose report is off: the first cell
    compiled in a session paid it, a sixth of notebook 01's second run (bench.first_run)."""
    pytest.importorskip("IPython")
    got = _fresh("import sys, json\nfrom IPython.testing.globalipapp import start_ipython\n"
                 "import nbaccel\nnbaccel.config['numba_warmup'] = False\n"
                 "ip = start_ipython()\nip.run_line_magic('load_ext', 'nbaccel')\n"
                 "ip.run_line_magic('nbaccel', 'config report=none')\n"
                 "ip.run_cell('import numpy as np\\nx = np.ones((64, 64))').raise_error()\n"
                 "ip.run_cell('%%compile --now --backend numba\\ny = np.tanh(x) * 2').raise_error()\n"
                 "import numpy as np\nok = float(ip.user_ns['y'][0, 0]) == float(np.tanh(1.0) * 2)\n"
                 f"print(json.dumps({{'ok': ok, 'loaded': {_loaded(['nbaccel_ext', 'anywidget', 'ipywidgets'])}}}))")
    assert got == {"ok": True, "loaded": []}


def test_the_compiler_loads_on_first_use():
    got = _fresh("import sys, json\nimport nbaccel as nb\n"
                 f"before = {_loaded(['numba'])}\n"
                 "from nbaccel import compile as c\n"
                 "f = nb.compile(lambda x: x * 2 + 1)\n"
                 "y = f(nb.ones(3))\n"
                 "print(json.dumps({'before': before, 'after': "
                 f"{_loaded(['numba'])}, 'y': y.tolist(), 'same': c is nb.compile, "
                 "'config': 'strict' in nb.config, "
                 "'explain': callable(nb.explain) and callable(nb.mark_dynamic)}))")
    assert got["before"] == [] and got["after"] == ["numba"]
    assert got["y"] == [3.0, 3.0, 3.0] and got["same"] and got["config"] and got["explain"]


def test_unknown_attribute_is_an_attribute_error():
    import nbaccel
    assert {"compile", "explain", "mark_dynamic", "config"} <= set(dir(nbaccel))   # tab completion
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        nbaccel.no_such_thing  # noqa: B018
    with pytest.raises(AttributeError):
        nbaccel.compiler.no_such_thing  # noqa: B018


# ---- thread pools (nbaccel/thread_pools.py, docs/threads.md) ---------------------------------

def test_configure_sets_what_is_unset_and_keeps_the_users_choice():
    from nbaccel import thread_pools
    env = {}
    assert thread_pools.configure(env) == thread_pools.SETTINGS and env == thread_pools.SETTINGS
    env = {"NUMBA_THREADING_LAYER": "workqueue"}
    thread_pools.configure(env)
    assert "NUMBA_THREADING_LAYER_PRIORITY" not in env
    env = {"NUMBA_THREADING_LAYER_PRIORITY": "workqueue"}
    assert thread_pools.configure(env) == env == {"NUMBA_THREADING_LAYER_PRIORITY": "workqueue"}


def test_a_plain_process_keeps_its_omp_wait_policy_unset_and_gets_dynamic_chunks():
    """``import nbaccel`` no longer sets OMP_WAIT_POLICY (process-wide, read by every OpenMP
    library loaded later): docs/threads.md."""
    env_clean = ("import os\nfor k in ('OMP_WAIT_POLICY', 'NUMBA_THREADING_LAYER', "
                 "'NUMBA_THREADING_LAYER_PRIORITY'):\n    os.environ.pop(k, None)\n")
    got = _fresh(env_clean + "import json, numpy as np\nimport nbaccel as nb\nimport numba\n"
                 "from nbaccel_kernels._parallel import dynamic_chunks\n"
                 "from nbaccel_kernels.quant import cpu, packing\n"
                 "w = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)\n"
                 "x = np.ones((1, 1024), np.float32)\n"
                 "y = cpu.int8_weight_only_matmul(x, *packing.quantize_int8(w))\n"
                 "with dynamic_chunks(4096) as chunk:\n    inside = numba.get_parallel_chunksize()\n"
                 "print(json.dumps({'policy': os.environ.get('OMP_WAIT_POLICY'), "
                 "'layer': numba.threading_layer(), 'chunk': chunk, 'inside': inside, "
                 "'after': numba.get_parallel_chunksize(), 'ok': bool(np.isfinite(y).all())}))")
    assert got["policy"] is None and got["ok"]
    assert got["layer"] in ("omp", "tbb", "workqueue")
    assert got["inside"] == got["chunk"] >= 1 and got["after"] == 0


def test_warm_up_and_a_first_kernel_import_do_not_deadlock():
    """`%load_ext` starts numba's warm-up on a thread; the compile thread's first kernel
    imports the fastmath helpers (@njit at import) meanwhile. The warm-up used to take numba's
    compiler lock and then the target context's cached-property lock, the @njit the other way
    round: the two threads waited on each other for ever (regression)."""
    got = _fresh("import json, threading\nfrom nbaccel.compiler.cache import warmup as numba_warmup\n"
                 "numba_warmup.start()\n"
                 "t = threading.Thread(target=lambda: __import__('nbaccel.compiler.codegen.fastmath'), daemon=True)\n"
                 "t.start()\nt.join(60)\n"
                 "print(json.dumps([not t.is_alive(), numba_warmup.wait(60)]))")
    assert got == [True, True]


def test_numba_set_up_runs_once_with_the_collector_paused():
    """compiler/cache/warmup.py: ensure() imports numba and loads its registries on the calling
    thread when no warm-up runs, with no garbage collection meanwhile (the collector is on
    again after, as the user had it), once per process; it freezes nothing."""
    got = _fresh("import gc, json, atexit, sys\n"
                 "from nbaccel.compiler.cache import warmup as w\n"
                 "seen = []\ngc.callbacks.append(lambda phase, info: seen.append(gc.isenabled()) "
                 "if phase == 'start' else None)\n"
                 "before = 'numba' in sys.modules\n"
                 "w.ensure()\nduring = [len(seen) < 5, all(seen)]\n"
                 "from numba.core.registry import cpu_target as c\n"
                 "loaded = bool(c.typing_context._registries) and bool(c.target_context._registries)\n"
                 "again = [w.start(), w.ensure(), w.wait(1)]\n"
                 "atexit._run_exitfuncs()\n"
                 "print(json.dumps([before, during, loaded, again, gc.isenabled(), gc.get_freeze_count()]))")
    # unpaused, the set-up ran ~270 collections; paused, none runs while the collector is off
    # and one or two run when it is back on
    assert got == [False, [True, True], True, [False, None, True], True, 0]


def test_a_user_who_switched_the_collector_off_keeps_it_off():
    got = _fresh("import gc, json\nfrom nbaccel.compiler.cache import warmup as w\n"
                 "gc.disable()\nw.ensure()\nprint(json.dumps(gc.isenabled()))")
    assert got is False


def test_first_use_of_nb_compile_starts_the_warm_up_unless_switched_off():
    code = ("import json, threading\nimport nbaccel as nb\n"
            "names = lambda: [t.name for t in threading.enumerate()]\n"
            "before = 'nbaccel-numba-warmup' in names()\n"
            "nb.config\nafter_config = 'nbaccel-numba-warmup' in names()\n"
            "from nbaccel.compiler.cache import warmup as w\n"
            "nb.compile\nprint(json.dumps([before, after_config, w._started.is_set(), w.wait(60)]))")
    assert _fresh(code) == [False, False, True, True]
    off = _fresh(code.replace("nb.config\n", "nb.config['numba_warmup'] = False\n"))
    assert off == [False, False, False, True]


def test_the_compiler_sets_numba_up_before_its_first_numba_kernel():
    got = _fresh("import json, numpy as np\nimport nbaccel as nb\n"
                 "from nbaccel.compiler.cache import warmup as w\n"
                 "nb.config['numba_warmup'] = True\n"
                 "from nbaccel.compiler.api import compile as c\n"
                 "f = c(lambda x: x * 2 + 1, backend='numba')\n"
                 "before = w._started.is_set()\n"
                 "y = f(np.ones(4, np.float32))\n"
                 "print(json.dumps([before, w._done.is_set(), y.tolist(), f.report.tier]))")
    assert got == [False, True, [3.0] * 4, "numba"]

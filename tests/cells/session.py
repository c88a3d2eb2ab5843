"""A whole notebook as one session, plainly and under ``%%compile``, compared cell for cell.

    python -m tests.cells.session NOTEBOOK

``NOTEBOOK`` is a Jupyter notebook (its code cells, in order) or numpy-100's exercise source
(``source/exercises100.ktx`` of rougier/numpy-100: its ``< aN`` answers). Each mode runs in a
fresh process with one IPython shell, every cell after the one before it, so names defined,
rebound and retyped by earlier cells reach later ones as in a notebook (the class of bug a
single-cell test never sees: numpy-100's exercise 88 lost its rebound ``Z``). Before each cell
NumPy's global random state is seeded with the cell's number in both modes.

Per cell it compares what the contract covers (tests/cells/harness.py): the exception, the
printed output, the trailing value, the warnings, and every user name's type and value. Values
travel between the processes pickled; a value that does not pickle is compared by its type.
Output that is a measurement (``%timeit`` lines) is not compared. It prints each difference,
the count of cells that behave as plainly, and both sessions' times.
"""
from __future__ import annotations

import contextlib
import io
import json
import pathlib
import pickle
import re
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[2]
_TIMEIT = re.compile(r"^.* per loop \(mean \S+ std\. dev\. of .*\)$", re.M)


def cells_of(path: pathlib.Path) -> list[tuple[str, str]]:
    """(label, source) of every code cell, in order."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        nb = json.loads(text)
        out = []
        for i, c in enumerate(nb["cells"]):
            if c["cell_type"] == "code":
                src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                if src.strip():
                    out.append((f"cell {i}", src.rstrip("\n") + "\n"))
        return out
    found = re.finditer(r"(?ms)^< a(\d+)\n(.*?)(?=^< [qha]\d+\n|\Z)", text)
    return [(f"answer {m.group(1)}", m.group(2).strip("\n") + "\n") for m in found]


def _pickled(value):
    try:
        return pickle.dumps(value)
    except Exception:                            # (modules, functions of the session, ...)
        return ("type", f"{type(value).__module__}.{type(value).__qualname__}")


def run_session(path: pathlib.Path, compiled: bool, out: pathlib.Path):
    """Run the notebook in this process and pickle one record per cell to ``out``."""
    from tests.cells import harness
    shell = harness.get_shell("auto")
    records = []
    t_all = time.perf_counter()
    for n, (label, src) in enumerate(cells_of(path)):
        shell.run_cell(f"import numpy as __np\n__np.random.seed({n})\ndel __np\n",
                       store_history=False, silent=True)
        buf = io.StringIO()
        show, shell.showtraceback = shell.showtraceback, (lambda *a, **k: None)
        try:
            with contextlib.redirect_stdout(buf), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("default")
                t0 = time.perf_counter()
                res = shell.run_cell(("%%compile\n" + src) if compiled else src, store_history=True)
                seconds = time.perf_counter() - t0
        finally:
            shell.showtraceback = show
        err = res.error_in_exec or res.error_before_exec
        fallback = None
        if compiled:
            from nbaccel.magics import get_extension
            fallback = getattr(get_extension(shell), "last_fallback", None)
        records.append(dict(
            label=label, seconds=seconds, fallback=fallback,
            stdout=_TIMEIT.sub("<timeit>", re.sub(r"Out\[\d+\]", "Out[N]", buf.getvalue())),
            error=None if err is None else (type(err).__name__, str(err)),
            value=_pickled(res.result), warnings=harness.warning_rows(caught),
            names={k: _pickled(v) for k, v in harness._user_names(shell).items()}))
    out.write_bytes(pickle.dumps(dict(records=records, seconds=time.perf_counter() - t_all)))


def _value(v):
    return ("type", v[1]) if isinstance(v, tuple) else pickle.loads(v)


def differences(plain: dict, comp: dict) -> list[str]:
    """What the compiled cell did differently (harness.differences on the pickled records)."""
    from tests.cells import harness
    out = []
    for key in ("error", "stdout", "warnings"):
        if plain[key] != comp[key]:
            out.append(f"{key}: plainly {plain[key]!r}, compiled {comp[key]!r}")
    if set(plain["names"]) != set(comp["names"]):
        out.append(f"names: only plainly {sorted(set(plain['names']) - set(comp['names']))}, "
                   f"only compiled {sorted(set(comp['names']) - set(plain['names']))}")
    pairs = [(k, plain["names"][k], comp["names"][k]) for k in sorted(set(plain["names"]) & set(comp["names"]))]
    for where, a, b in pairs + [("Out", plain["value"], comp["value"])]:
        if isinstance(a, tuple) or isinstance(b, tuple):      # compared by type only
            if a != b:
                out.append(f"{where}: plainly {a!r}, compiled {b!r}")
            continue
        d = harness.value_diff(_value(a), _value(b), where)
        if d:
            out.append(d)
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__)
        return 2
    path = pathlib.Path(argv[0]).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        runs = {}
        for mode in ("plain", "compiled"):
            target = pathlib.Path(tmp) / f"{mode}.pkl"
            subprocess.run([sys.executable, "-m", "tests.cells.session", "--run", mode, str(path), str(target)],
                           cwd=ROOT, check=True)
            runs[mode] = pickle.loads(target.read_bytes())
    plain, comp = runs["plain"]["records"], runs["compiled"]["records"]
    same = 0
    for p, c in zip(plain, comp):
        diffs = differences(p, c)
        if diffs:
            print(f"--- {p['label']} (compiled run: {c['fallback'] or 'compiled'})")
            for d in diffs:
                print("    " + d[:800])
        else:
            same += 1
    print(f"{same}/{len(plain)} cells as plainly; the session took {runs['plain']['seconds']:.2f} s plainly "
          f"and {runs['compiled']['seconds']:.2f} s under %%compile (compiles included)")
    return 0 if same == len(plain) else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run"]:
        sys.path.insert(0, str(ROOT))
        run_session(pathlib.Path(sys.argv[3]), sys.argv[2] == "compiled", pathlib.Path(sys.argv[4]))
    else:
        sys.exit(main())

"""``%%compile --verify`` and ``%nbaccel verify on``: check the contract on the user's own cell.

The cell runs compiled as usual (its results are the ones the notebook keeps). Then the plain
cell runs as a shadow, in a copy of the namespace whose inputs (the names the cell reads, and
the globals that notebook functions it calls read) are copies taken before the compiled run,
from the same global random state, print options and errstate. The two runs are compared:

* the namespace: names added, removed or rebound, their types, dtypes, shapes and values
  (floating point within a tolerance set by the dtype), with the first differing element;
* what each printed, and the trailing expression's value;
* the exception each raised (type and message);
* the global ``np.random`` state, print options and errstate they left;
* the warnings each issued (category, message, line), as the warning filters let them through.
  Both runs record theirs from the same start: entering the recording empties the warning
  registries, so under --verify a "default" warning shows on every run of the cell; the
  compiled run's warnings are then shown to the user, the shadow's never.

Differences are printed to stderr (nothing is printed when there are none) and kept as
:class:`Verdict` in ``get_extension(shell).last_verify`` and on the report (``-o NAME``:
``NAME.verify``). Files, plots and other side effects are not checked: the shadow run's figures
are closed, and what it writes to files is written twice.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import io
import re
import sys
import types
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import cellfunc
from .cellfunc import ends_quiet

NOT_CHECKED = ("files written", "plots and displays", "other side effects of the shadow run")


@dataclass
class Verdict:
    cell: str
    differences: list = field(default_factory=list)
    checked: list = field(default_factory=list)
    not_checked: tuple = NOT_CHECKED
    note: str = ""

    def text(self) -> str:
        head = f"nbaccel --verify {self.cell}: "
        if not self.differences:
            body = head + "no differences" + (f" ({self.note})" if self.note else "")
        else:
            body = head + f"{len(self.differences)} difference(s) from the plain cell:\n" + \
                "\n".join(f"  {d}" for d in self.differences)
        return body + f"\n  not checked: {', '.join(self.not_checked)}"


class _Tee(io.TextIOBase):
    def __init__(self, out):
        self.out, self.buf = out, io.StringIO()

    def write(self, s):
        self.buf.write(s)
        return self.out.write(s)

    def flush(self):
        self.out.flush()


@contextlib.contextmanager
def not_the_cells_output():
    """nbaccel's own output (the text report, --explain) while --verify records what the cell
    prints: shown to the user, never compared with the plain cell's output."""
    out = sys.stdout
    if isinstance(out, _Tee):
        with contextlib.redirect_stdout(out.out):
            yield
    else:
        yield


def _copy(v):
    if isinstance(v, (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType, np.ufunc)):
        return v
    if isinstance(v, np.ndarray):
        return v.copy()
    try:
        return copy.deepcopy(v)
    except Exception:     # an object that cannot be copied is shared (its changes are not checked)
        return v


def _reads(src):
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return set()
    loads, stores, dels = cellfunc.analyse(tree)
    return set(loads) | set(stores) | set(dels)


def _inputs(ns, names):
    """The names to copy: the cell's own, and the globals notebook functions it reads use."""
    out = set(n for n in names if n in ns)
    for n in list(out):
        v = ns[n]
        code = getattr(v, "__code__", None)
        if isinstance(v, types.FunctionType) and getattr(v, "__module__", None) == "__main__" and code:
            out |= {m for m in code.co_names if m in ns}
    return out


def _state():
    return np.random.get_state(), np.get_printoptions(), np.geterr()


def _set_state(s):
    np.random.set_state(s[0])
    np.set_printoptions(**s[1])
    np.seterr(**s[2])


def _state_diffs(comp, plain):
    out = []
    c, p = comp[0], plain[0]
    if c[0] != p[0] or not np.array_equal(c[1], p[1]) or c[2:] != p[2:]:
        out.append("np.random global state: the compiled cell drew differently from the plain cell")
    if comp[1] != plain[1]:
        out.append(f"print options: {comp[1]} != {plain[1]}")
    if comp[2] != plain[2]:
        out.append(f"errstate: {comp[2]} != {plain[2]}")
    return out


def run(ext, run_compiled, line, cell):
    """Run the cell compiled (``run_compiled()``), then plainly as a shadow; compare."""
    __tracebackhide__ = True  # noqa: F841
    shell = ext.shell
    ns = shell.user_ns
    src = shell.transform_cell(cell).rstrip() + "\n"
    count = ext._cell_number()
    before = dict(ns)
    copies = {n: _copy(ns[n]) for n in _inputs(ns, _reads(src))}
    state0 = _state()
    plt = sys.modules.get("matplotlib.pyplot")
    tee = _Tee(sys.stdout)
    value = exc = None
    with contextlib.redirect_stdout(tee), warnings.catch_warnings(record=True) as c_warned:
        try:
            value = run_compiled()
        except Exception as e:           # the user's exception (or a usage error): compared below
            exc = e
    for w in c_warned:                   # the cell's own warnings, shown as they came
        warnings._showwarnmsg(w)
    if exc is not None and type(exc).__name__ == "UsageError":
        raise exc
    state1 = _state()
    verdict = Verdict(cell=cellfunc.cell_label(count, src))
    fallback = getattr(ext, "last_fallback", None)
    if fallback:
        verdict.note = f"it ran plainly: {fallback}"
    shadow = dict(before)
    shadow.update(copies)
    figs = set(plt.get_fignums()) if plt is not None else set()
    _set_state(state0)
    with warnings.catch_warnings(record=True) as p_warned:
        p_value, p_exc, p_out = _run_plain(shell, src, shadow)
    state_plain = _state()
    _set_state(state1)
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        for num in plt.get_fignums():
            if num not in figs:
                plt.close(num)
    d = verdict.differences
    hidden = shell.user_ns_hidden
    user = lambda k: not k.startswith("_") and k not in hidden and k not in ("In", "Out", "exit", "quit")  # noqa: E731
    keys = {k for k in set(ns) | set(shadow) if user(k)}
    for k in sorted(keys):
        if k not in ns or k not in shadow:
            if (k in ns) != (k in shadow):
                d.append(f"{k}: {'only the compiled' if k in ns else 'only the plain'} cell binds it")
            continue
        if ns[k] is before.get(k) and shadow[k] is before.get(k, shadow[k]) and k not in copies:
            continue
        diff = value_diff(shadow[k], ns[k], k)
        if diff:
            d.append(diff)
    if p_out != tee.buf.getvalue():
        d.append(f"stdout: the plain cell printed {_short(p_out)}, the compiled cell {_short(tee.buf.getvalue())}")
    c_err = None if exc is None else (type(exc).__name__, str(exc))
    p_err = None if p_exc is None else (type(p_exc).__name__, str(p_exc))
    if c_err != p_err:
        d.append(f"exception: the plain cell raised {p_err}, the compiled cell {c_err}")
    if exc is None and p_exc is None and value is not None:
        diff = value_diff(p_value, value, "Out")
        if diff:
            d.append(diff)
    d += _state_diffs(state1, state_plain)
    c_rows, p_rows = warning_rows(c_warned), warning_rows(p_warned)
    if c_rows != p_rows:
        d.append(f"warnings: the plain cell issued {_rows_text(p_rows)}, the compiled cell {_rows_text(c_rows)}")
    verdict.checked = ["names", "stdout", "exceptions", "Out", "np.random state", "print options", "errstate",
                       "warnings"]
    ext.last_verify = verdict
    report = ext.last[1] if ext.last else None
    if report is not None:
        report.verify = verdict
    if d:
        print(verdict.text(), file=sys.stderr)
    if exc is not None:
        raise exc
    return value


_SHADOW_FILE = "<nbaccel --verify>"
_CELL_FILE = re.compile(r"^<ipython-input-\d+-[0-9a-f]+>$")


def warning_rows(records):
    """(category, message, file, line) of each warning; the cell's file (IPython's for the
    compiled run, the shadow's own) reads ``<cell>``."""
    out = []
    for w in records:
        fn = str(w.filename)
        out.append((w.category.__name__, str(w.message),
                    "<cell>" if fn == _SHADOW_FILE or _CELL_FILE.match(fn) else fn, w.lineno))
    return out


def _rows_text(rows):
    if not rows:
        return "none"
    return "; ".join(f"{c} at {f}:{ln}: {_short(m, 60)}" for c, m, f, ln in rows)


def _run_plain(shell, src, shadow):
    tree = ast.parse(src)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = tree.body[:-1] if last is not None else tree.body
    out = io.StringIO()
    value = exc = None
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(ast.Module(body, []), _SHADOW_FILE, "exec"), shadow)   # noqa: S102
            if last is not None:
                value = eval(compile(ast.Expression(last.value), _SHADOW_FILE, "eval"), shadow)  # noqa: S307
        except Exception as e:
            exc = e
    if ends_quiet(src):
        value = None
    return value, exc, out.getvalue()


def _short(s, n=80):
    r = repr(s)
    return r if len(r) <= n else r[:n - 4] + "...'"


# -- comparing values ------------------------------------------------------------------------------

def _tolerance(dt):
    if dt.kind not in "fc":
        return 0.0
    size = dt.itemsize // (2 if dt.kind == "c" else 1)
    return {2: 1e-3, 4: 2e-5}.get(size, 1e-9)


def _array_diff(a, b, where):
    if type(a) is not type(b):
        return f"{where}: type {type(a).__name__} (plain) != {type(b).__name__} (compiled)"
    if a.dtype != b.dtype:
        return f"{where}: dtype {a.dtype} (plain) != {b.dtype} (compiled)"
    if a.shape != b.shape:
        return f"{where}: shape {a.shape} (plain) != {b.shape} (compiled)"
    if a.dtype.kind in "fc":
        tol = _tolerance(a.dtype)
        same = np.isclose(a, b, rtol=tol, atol=tol, equal_nan=True)
    elif a.dtype.kind in "biuMm":
        same = a == b
    else:
        same = np.array([x == y for x, y in zip(a.ravel().tolist(), b.ravel().tolist())],
                        dtype=bool).reshape(a.shape) if a.size else np.ones(a.shape, bool)
    same = np.asarray(same)
    if same.all():
        return None
    idx = tuple(int(i) for i in np.argwhere(~same)[0]) if same.ndim else ()
    return f"{where}: values differ at {list(idx) if idx else '()'}: {a[idx]!r} (plain) != {b[idx]!r} (compiled)"


def _same_type(a, b):
    ta, tb = type(a), type(b)
    return ta is tb or (ta.__module__ == tb.__module__ == "__main__" and ta.__qualname__ == tb.__qualname__)


def value_diff(a, b, where="value", depth=0):
    """How ``a`` (the plain run's) and ``b`` (the compiled run's) differ, or None."""
    if not _same_type(a, b):
        return f"{where}: type {type(a).__name__} (plain) != {type(b).__name__} (compiled)"
    if isinstance(a, np.ndarray):
        return _array_diff(a, b, where)
    if isinstance(a, np.generic):
        return _array_diff(np.asarray(a), np.asarray(b), where)
    if isinstance(a, float):
        if a == b or (a != a and b != b) or abs(a - b) <= 1e-9 * max(abs(a), abs(b)) + 1e-12:
            return None
        return f"{where}: {a!r} (plain) != {b!r} (compiled)"
    if isinstance(a, (int, str, bytes, bool, complex, type(None))):
        return None if a == b else f"{where}: {a!r} (plain) != {b!r} (compiled)"
    if isinstance(a, (types.ModuleType, types.BuiltinFunctionType)):
        return None if a is b else f"{where}: {a!r} (plain) != {b!r} (compiled)"
    if isinstance(a, (types.FunctionType, type)):
        return None if a.__qualname__ == b.__qualname__ else f"{where}: {a!r} (plain) != {b!r} (compiled)"
    if depth > 3:
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: length {len(a)} (plain) != {len(b)} (compiled)"
        for i, (u, v) in enumerate(zip(a, b)):
            diff = value_diff(u, v, f"{where}[{i}]", depth + 1)
            if diff:
                return diff
        return None
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{where}: keys {list(a)} (plain) != {list(b)} (compiled)"
        for k in a:
            diff = value_diff(a[k], b[k], f"{where}[{k!r}]", depth + 1)
            if diff:
                return diff
        return None
    if isinstance(a, set):
        return None if a == b else f"{where}: {a!r} (plain) != {b!r} (compiled)"
    state = getattr(a, "__dict__", None)
    if isinstance(state, dict) and type(a).__module__ == "__main__":
        return value_diff(state, b.__dict__, f"{where}.__dict__", depth + 1)
    return None          # other objects (figures, models from libraries): the type is compared

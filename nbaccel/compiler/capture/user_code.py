"""Where the user is, and what a graph break tells them: the user's frame and line (nbaccel's
own files and the standard library are machinery, never "the user's line"), a cell's file named
as IPython names it, the graph-break exceptions, and the fix each kind of break suggests."""
from __future__ import annotations

import linecache
import os
import re
import sys

from ..runtime import fpflags

# nbaccel/: this file is nbaccel/compiler/<room>/<module>.py
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# frames in these files are nbaccel's own machinery, never "the user's line"
# Frames in nbaccel's own files are machinery, never "the user's line" (the demo is user code).
_SKIP_PREFIXES = (_PKG_DIR + os.sep, os.path.dirname(os.__file__))
_USER_FILES_IN_PKG = (os.path.join(_PKG_DIR, "demo.py"),)


_internal_memo: dict = {}


def _is_internal(filename: str) -> bool:
    hit = _internal_memo.get(filename)
    if hit is None:
        hit = _internal_memo[filename] = filename.startswith(_SKIP_PREFIXES) and filename not in _USER_FILES_IN_PKG
    return hit



class GraphBreakError(RuntimeError):
    """Raised instead of a graph break when ``fullgraph=True``."""


class TraceTooCostly(RuntimeError):
    """Tracing this call costs more than running it plainly: the caller runs it plainly
    instead (and its later calls too)."""


class TooManyGraphBreaks(TraceTooCostly):
    """A call passed the graph-break limit (``config["max_graph_breaks"]``)."""


class TraceLoopsCompiled(TraceTooCostly):
    """A traced call with a budget calls a compiled function again after a graph break: a
    Python loop that reads a value every round (``TraceSession.note_inline``)."""


class TraceAliasedInputs(TraceTooCostly):
    """A traced call writes into an input whose memory another input shares (a view bound in
    an earlier cell and its base): the graph holds them as separate values, so a read of the
    other after the write would see the old value (``GivingUp.note_input_write``)."""


class TraceViewNotShared(TraceTooCostly):
    """A view the traced call hands back cannot share its base's final memory (views.py,
    ``share_views``): handed back, it would be a copy that a later write into either side does
    not reach (``GivingUp.note_view_not_shared``)."""


class TraceOverBudget(TraceTooCostly):
    """A trace ran past its deadline (``TraceSession.deadline``, set from the plain code's
    measured time): its Python loops unroll into a graph that costs more to trace and compile
    than the plain code costs to run."""


# What to do about each kind of graph break: (pattern over the reason, fix). The first match
# wins; the fix names the user's construct (``.item()``, ``float()``, ``.put()``, ``print``).
# "After the compiled code" is the end of a %%compile cell or outside an nb.compile function.
_AFTER = "after the compiled code (at the end of the cell, or outside the compiled function)"
_FIXES = [
    (r"a Python bool is needed",
     "use nb.where(cond, a, b) (np.where in NumPy code) instead of a Python `if` on array data"),
    (r"a Python scalar is needed \((?:ndarray)?(\.item\(\)|float\(\)|int\(\)|complex\(\))\)", None),
    (r"a Python scalar is needed \(an index\)",
     "an array used as a Python int (range(n), a shape, an index) needs its value: pass a Python "
     "int computed outside the compiled code, or index with the array itself"),
    (r"a Python list is needed", f"keep the array instead of .tolist(); call .tolist() {_AFTER}"),
    (r"^ndarray\.(item) has no op", None),         # (a scalar asked of NumPy's own method)
    (r"^ndarray\.(\w+) has no op",
     "nothing to change for correctness (NumPy runs .{0} on the value); to keep one graph, use an "
     "op from docs/supported-ops.md or move .{0} " + _AFTER),
    (r"^fft\.(\w+) has no op",
     "nothing to change for correctness (NumPy runs np.fft.{0} on the value); to keep one graph, "
     "move it " + _AFTER),
    (r"print", "print outside the compiled region, or print shapes instead of values"),
    (r"numpy", "stay with nbaccel/NumPy ops; np.asarray() inside the compiled region forces a sync"),
    (r"data-dependent", "the output shape depends on the data; compute it outside, or use a mask with where()"),
    (r"no-op", "use a function the op table supports (see docs/supported-ops.md)"),
]


def _scalar_fix(construct: str, line: str) -> str:
    """``.item()`` / ``float()`` / ``int()``: in a condition, the array comparison and where();
    elsewhere, the 0-d array itself."""
    if re.search(r"\b(if|elif|while)\b", line):
        return (f"keep the 0-d array instead of {construct}: compare it as an array (x.max() > 0.5) and "
                f"choose with np.where(cond, a, b) rather than a Python `if`; call {construct} {_AFTER}")
    return (f"keep the 0-d array instead of {construct}: it works in arithmetic, comparisons and "
            f"np.round(m, 4); call {construct} {_AFTER}")


def _fix_for(reason: str, line: str = "") -> str:
    """The fix for a graph break's ``reason`` at the user's source ``line``."""
    for pattern, fix in _FIXES:
        m = re.search(pattern, reason)
        if m:
            if fix is None:
                construct = m.group(1)
                return _scalar_fix(construct if construct.endswith(")") else f".{construct}()", line)
            return fix.format(*m.groups())
    return ""


def user_line():
    """(filename, lineno) of the user's code: a cheap stack walk done for every traced op."""
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if not _is_internal(fn):
            fpflags.note_globals(fn, f.f_globals)
            return fn, f.f_lineno
        f = f.f_back
    return None


def display_filename(filename: str) -> str:
    """IPython runs each cell from a temporary file; name it as IPython's tracebacks do
    ("Cell In[5]"), which means something to the user and is the same on every machine."""
    ip = sys.modules.get("IPython")
    shell = ip.get_ipython() if ip is not None and hasattr(ip, "get_ipython") else None
    number = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(filename)
    return f"Cell In[{number}]" if number is not None else filename


def user_frame():
    """The innermost stack frame outside nbaccel and the standard library: the user's line."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not _is_internal(fn) and "/numpy/" not in fn and "site-packages" not in fn:
            return display_filename(fn), f.f_lineno, linecache.getline(fn, f.f_lineno).strip()
        f = f.f_back
    return "<unknown>", 0, ""

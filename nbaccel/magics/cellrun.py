"""Running a %%compile cell beyond the compiled call: write-back, the plain path and the last
safety net (see docs/magics.md).

* :meth:`CellRuns._settle` / :meth:`CellRuns._write_partial`: what the namespace holds after a
  run or after a user exception (the names the plain cell would have bound).
* :meth:`CellRuns._internal_failure`: whether an exception is nbaccel's (the cell then runs
  again plainly from its unchanged inputs) or the user's.
* :meth:`CellRuns._run_plain`: the cell as plain Python (IPython's way: the body, then the
  trailing expression), with a report that says why.
* :meth:`CellRuns._maybe_probe` / :meth:`CellRuns._probe_plain`: cells whose tracing costs far
  more than the plain run go plain.
"""
from __future__ import annotations

import ast
import os
import re
import time
import types

from IPython.core.error import UsageError

from . import boundary, cellfunc
from ..compiler import GraphBreakError
from ..compiler import api as capi
from ..compiler.capture.capture import TraceTooCostly
from ..tensor import Tensor
from ..compiler.report.report import CompileReport
from .cell_values import _swap_out

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class CellRuns:
    """Mixed into NbaccelMagics (which provides ``shell``, ``by_count``, ``last``, ``_show``)."""

    def _settle(self, entry, ns, env, keep=frozenset()):
        """After a run: shared (global) names hold NumPy values, functions and classes defined in
        the cell carry their plain names, and containers the cell filled hold no tensors."""
        for k in entry.outputs:
            if k in ns:
                v = ns[k]
                if k in entry.shared:
                    v = ns[k] = _swap_out(_settled(v))
                _fix_qualname(v, entry.qualprefix)
                _fix_containers(v, prefix=entry.qualprefix)
        for v in env.values.values():
            _fix_containers(v)
        for k in cellfunc.read_names(entry):   # containers the cell reads as globals (lst.append(t))
            v = ns.get(k)
            if type(v) in (list, dict) or type(v).__module__ == "__main__":
                _fix_containers(v, keep=keep)       # (tensors it held before the cell stay)

    def _write_partial(self, exc, entry, ns):
        """A user exception: the names the cell had bound when it raised are written back, as
        the plain cell would have left them."""
        tb = exc.__traceback__
        frame = None
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename == entry.filename and code.co_name == entry.fname:
                frame = tb.tb_frame
            tb = tb.tb_next
        if frame is None:
            return
        local_vars = frame.f_locals
        for k in entry.shared & entry.outputs:
            if k in ns:
                ns[k] = _swap_out(_settled(ns[k]))
        for k, local in entry.slots:
            if local in local_vars:
                v = _settled(local_vars[local])
                ns[k] = _swap_out(v)
                _fix_qualname(ns[k], entry.qualprefix)
            elif k in entry.dels:
                ns.pop(k, None)

    @staticmethod
    def _maybe_probe(entry, report):
        """A run with many graph breaks that took long: the next run measures the plain cell."""
        limits = capi.config["plain_probe"]
        breaks = report.graph_breaks
        if len(breaks) >= limits["breaks"] and (report.call_seconds or 0.0) > limits["seconds"]:
            lines = {}
            for b in breaks:
                lines[b.get("lineno")] = lines.get(b.get("lineno"), 0) + 1
            entry.probe = (report.call_seconds, len(breaks), max(lines, key=lines.get))

    def _probe_plain(self, entry, count, opts):
        """Run the cell plainly (a valid run of it) and compare with the last compiled run."""
        compiled, breaks, line = entry.probe
        entry.probe = None
        t0 = time.perf_counter()
        reason = "ran plainly once to compare with the compiled run"
        try:
            return self._run_plain(entry, count, opts, reason)
        finally:
            plain = time.perf_counter() - t0
            limits = capi.config["plain_probe"]
            if compiled > limits["ratio"] * plain + limits.get("slack", 0.05):
                entry.plain_reason = (f"tracing cost more than running plainly: {compiled:.3g} s "
                                      f"compiled against {plain:.3g} s plainly, {breaks} graph "
                                      f"breaks (most at line {line}); the cell runs plainly")
            self.last_fallback = entry.plain_reason or reason

    def _internal_failure(self, exc, entry):
        """Why ``exc`` is nbaccel's failure rather than the user's (None: the user's code raised
        it, as it would plainly): it was raised inside nbaccel, or it is a tracer's TypeError."""
        if isinstance(exc, TraceTooCostly):
            return str(exc)
        if isinstance(exc, (UsageError, GraphBreakError)):
            return None
        frames = list(_frames(exc.__traceback__))
        cell_at = max((i for i, f in enumerate(frames) if f[0] == entry.filename), default=-1)
        boundary_file = os.path.join("magics", "boundary.py")
        # raised inside nbaccel after the cell's own line (not in code the boundary called)
        inside = False
        for fn, _ in frames[cell_at + 1:]:
            if fn.endswith(boundary_file):
                continue                      # the first frame past the boundary decides
            inside = fn.startswith(_PKG_DIR)
            break
        mentions = "Tensor" in str(exc) or "tensor" in str(exc) or "nbaccel" in str(exc)
        if not (inside or mentions):         # other code failed on a Tensor it was handed
            inside = _tensor_reached_other_code(exc.__traceback__, entry.filename)
        if inside or mentions:
            where = ""
            if exc.__traceback__ is not None:
                user = [t for t in _frames(exc.__traceback__) if t[0] == entry.filename]
                if user:
                    where = f" at line {user[-1][1]}"
            self._compiled_failure = (exc, where)    # _run_plain words the report from what the user gets
            return f"the compiled run failed{where} ({type(exc).__name__}: {exc}); the cell ran plainly"
        return None

    def _run_plain(self, entry, count, opts, reason, fresh=True):
        """Run the cell as plain Python in the user namespace (IPython's way: the body, then the
        trailing expression's value). User exceptions propagate as they would plainly."""
        __tracebackhide__ = True  # noqa: F841
        ns = self.shell.user_ns
        tree = self.shell.compile.ast_parse(entry.src, entry.filename, "exec")
        last = tree.body[-1] if tree.body else None
        value = None
        body = tree.body[:-1] if isinstance(last, ast.Expr) else tree.body
        failed, self._compiled_failure = getattr(self, "_compiled_failure", None), None
        t0 = time.perf_counter()
        try:
            exec(compile(ast.Module(body, []), entry.filename, "exec", dont_inherit=True), ns)
            if isinstance(last, ast.Expr):
                value = eval(compile(ast.Expression(last.value), entry.filename, "eval",
                                     dont_inherit=True), ns)
        except Exception as e:
            reason = _as_raised(reason, failed, e)
            raise _from_cell(e, entry.filename, self.shell, count)
        finally:
            self._show_plain(entry, count, opts, reason, time.perf_counter() - t0)
        return None if entry.quiet else value

    def _show_plain(self, entry, count, opts, reason, seconds):
        rep = CompileReport(name=cellfunc.cell_label(count, entry.src), tier="plain", backend=opts.backend, mode=opts.mode,
                            compiled_seconds=seconds, graphs=0, fallback=reason)
        rep.first_call_seconds = seconds
        entry.reports.append(rep)
        del entry.reports[:-3]
        self.by_count[count] = (entry, rep)
        self.last = (entry, rep)
        self._show(rep, opts.report, entry)
        if opts.output:
            self.shell.user_ns[opts.output] = rep


def _as_raised(reason, failed, exc):
    """The report's reason when the plain run raised ``exc``: worded as the exception the user
    sees. A compiled run that stopped on the same error (nbaccel's ShapeError with NumPy's text,
    say) is that exception, named as NumPy names it; a different failure keeps its own wording
    and says what the plain cell then raised."""
    seen = f"{type(exc).__name__}: {exc}"
    if failed is None or not (reason or "").startswith("the compiled run failed"):
        return reason
    compiled, where = failed
    if str(compiled) == str(exc) and isinstance(compiled, type(exc)):
        return f"the cell raised {seen}{where}; it ran plainly, so the exception is the plain cell's own"
    return f"{reason} and raised {seen}"


def safety_net_disabled() -> bool:
    """Strict (``nb.config["strict"] = True``, as in tests): an internal failure is raised, not
    hidden by running the cell again plainly."""
    return bool(capi.config.get("strict"))


def _tensor_reached_other_code(tb, filename):
    """True when a frame after the cell's own (in a library the cell called, or in an operator
    of another library's object) holds a Tensor: the plain cell would have handed it NumPy
    values, so the failure is nbaccel's (``scipy_matrix @ np.ones(3)``)."""
    past_cell = False
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == filename:
            past_cell = True
        elif past_cell and not code.co_filename.startswith(_PKG_DIR):
            try:
                if any(isinstance(v, Tensor) for v in tb.tb_frame.f_locals.values()):
                    return True
            except Exception:   # pragma: no cover - a frame whose locals cannot be read
                pass
        tb = tb.tb_next
    return False


def _frames(tb):
    while tb is not None:
        yield tb.tb_frame.f_code.co_filename, tb.tb_lineno
        tb = tb.tb_next


def _settled(v):
    """A written-back value: NumPy values for NumPy-flavoured tensors (tracers that never got a
    value are left as they are; they cannot be read)."""
    if isinstance(v, Tensor) and v._node is not None:
        return v
    try:
        return boundary.to_numpy(v)
    except Exception:   # pragma: no cover - a value that cannot be realised stays as it was
        return v


def _fix_containers(v, depth=0, prefix=None, keep=frozenset()):
    """Lists and dicts the cell filled with tensors (``res.append(t)``), and attributes of
    notebook objects it set (``self.mu = v.mean()``), hold NumPy values, in place (other
    references see the same change); functions inside them carry their plain names."""
    if depth > 3 or (type(v) in (list, dict) and len(v) > 10_000):   # (a big container: left as is)
        return
    if prefix and isinstance(v, types.FunctionType):
        _fix_qualname(v, prefix)
        return
    if type(v).__module__ == "__main__" and not isinstance(v, type) and type(getattr(v, "__dict__", None)) is dict:
        _fix_containers(v.__dict__, depth + 1, prefix, keep)
        return
    if type(v) is list:
        for i, item in enumerate(v):
            if isinstance(item, Tensor) and item._np and item._node is None and id(item) not in keep:
                v[i] = boundary.to_numpy(item)
            elif _swap_out(item) is not item:          # nbaccel.numpy's abs -> NumPy's
                v[i] = _swap_out(item)
            else:
                _fix_containers(item, depth + 1, prefix, keep)
    elif type(v) is dict:
        for k, item in list(v.items()):
            if isinstance(item, Tensor) and item._np and item._node is None and id(item) not in keep:
                v[k] = boundary.to_numpy(item)
            elif _swap_out(item) is not item:
                v[k] = _swap_out(item)
            else:
                _fix_containers(item, depth + 1, prefix, keep)


def _fix_qualname(obj, prefix, depth=0):
    """Functions and classes defined in the cell are named as the plain cell names them
    (``f``, ``Model.forward``), not after the function nbaccel made of the cell."""
    if depth > 2 or not prefix:
        return
    if isinstance(obj, types.FunctionType):
        _plain_defaults(obj)
    elif isinstance(obj, type) and depth == 0:
        for v in list(vars(obj).values()):
            if isinstance(getattr(v, "__func__", v), types.FunctionType):
                _plain_defaults(getattr(v, "__func__", v))
    if isinstance(obj, (types.FunctionType, type)) and obj.__qualname__.startswith(prefix):
        obj.__qualname__ = obj.__qualname__[len(prefix):]
        code = getattr(obj, "__code__", None)
        if code is not None and hasattr(code, "co_qualname") and code.co_qualname.startswith(prefix):
            obj.__code__ = code.replace(co_qualname=code.co_qualname[len(prefix):])
        if isinstance(obj, type):
            for v in list(vars(obj).values()):
                _fix_qualname(getattr(v, "__func__", v), prefix, depth + 1)


def _plain_defaults(fn):
    """Default values evaluated in the compiled cell (``def h(v, fn=np.sin)`` saw nbaccel.numpy's
    ``sin``; ``base=x * 2`` a tensor) hold what the plain cell's defaults hold."""
    if fn.__defaults__:
        new = tuple(_swap_out(_settled(d)) for d in fn.__defaults__)
        if any(a is not b for a, b in zip(new, fn.__defaults__)):
            fn.__defaults__ = new
    if fn.__kwdefaults__:
        new = {k: _swap_out(_settled(d)) for k, d in fn.__kwdefaults__.items()}
        if any(new[k] is not fn.__kwdefaults__[k] for k in new):
            fn.__kwdefaults__ = new


def _from_cell(exc, filename, shell=None, count=None):
    """``exc`` with its traceback starting at the cell's first frame and without nbaccel's
    frames after the user's last one: the traceback looks like the plain cell's. With the
    ``shell`` and the run's ``count``, IPython shows it as the plain cell's too
    (:func:`_shown_as_plain`)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None:
        return exc
    last_user, cur = tb, tb
    while cur is not None:
        if not cur.tb_frame.f_code.co_filename.startswith(_PKG_DIR):
            last_user = cur
        cur = cur.tb_next
    last_user.tb_next = None          # what follows is nbaccel's own frames only
    exc = exc.with_traceback(tb)
    if shell is not None and count is not None:
        _shown_as_plain(exc, tb, filename, shell, count)
    return exc


def _shown_as_plain(exc, tb, filename, shell, count):
    """IPython formats a magic's exception from the cell's first line: above the user's frames
    it shows ``get_ipython().run_cell_magic('compile', ...)`` and "[... skipping hidden 2
    frame]", and it labels the cell ``Cell In[k]`` with the number the cell had when it was
    first compiled (its code, and so its file name, is reused). The plain cell's traceback
    starts at the user's line and names this run's number. IPython asks an exception for
    ``_render_traceback_`` before formatting it (ipyparallel's hook): the traceback is formatted
    there, lazily, from the user's frames alone, with the cell's file name mapped to ``count``
    while it is. The number is the one IPython gave this run's cell (its running result's; the
    magic's ``count`` counts only stored cells)."""
    count = shown_count(shell, count)

    def render():
        names = getattr(shell.compile, "_filename_map", None)
        before = names.get(filename) if names is not None else None
        if names is not None:
            names[filename] = count
        try:
            return shell.InteractiveTB.structured_traceback(type(exc), exc, tb, tb_offset=0)
        finally:
            if names is not None:
                if before is None:
                    names.pop(filename, None)
                else:
                    names[filename] = before

    try:
        exc._render_traceback_ = render
    except (AttributeError, TypeError):  # an exception type without a __dict__: IPython's own way
        pass


def shown_count(shell, count):
    """The number IPython shows for this run's cell: its running result's (the magic's
    ``count`` counts only stored cells, and a reused cell file keeps its first number)."""
    running = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    return getattr(running, "execution_count", None) or count


def framed_as_module(fn):
    """``fn`` (a cell's function) with its code named ``<module>``, as the plain cell's code is:
    IPython heads a traceback's frame with the function and its arguments ("in
    cell_3(x, __nbaccel_env__)") for any other name. The entry's ``fname`` is this name."""
    code = fn.__code__
    fn.__code__ = code.replace(co_name="<module>", **({"co_qualname": "<module>"}
                                                     if hasattr(code, "co_qualname") else {}))


def graph_break_as_shown(exc, entry, shell, count, label):
    """A GraphBreakError's message names the cell as its traceback does: ``label`` for the
    cell's file, IPython's "Cell In[k]" with this run's number."""
    names = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    text = str(exc).replace(entry.filename, label)
    stored = names.get(entry.filename)
    if stored is not None:
        text = text.replace(f"Cell In[{stored}]", f"Cell In[{shown_count(shell, count)}]")
    exc.args = (text,)
    return exc


def _as_name_error(exc, entry):
    """A cell name read before the cell bound it (the namespace lacked it too) raises
    ``UnboundLocalError`` inside the cell function; the plain cell raises ``NameError``."""
    if type(exc) is not UnboundLocalError:
        return exc
    m = re.search(r"local variable '(\w+)'", str(exc))
    if m is None or m.group(1) not in entry.outputs:
        return exc
    new = NameError(f"name '{m.group(1)}' is not defined")
    new.__suppress_context__ = True
    return new.with_traceback(exc.__traceback__)

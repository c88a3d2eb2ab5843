"""Cell sequences: random notebooks whose cells share one namespace, run plainly and under
``%%compile``, compared cell by cell.

The program fuzzer (programs.py) checks one function on fresh inputs. What it cannot see is a
notebook's state between cells: a name an earlier cell bound as a float64 16x16 array that the
next cell rebinds as an int64 50x50 one, a function whose parameter has the name of a global,
a lambda that reads a global the cell then rebinds, a method that writes into an array in
place and a later line that prints it, a view bound in one cell whose base a later cell
writes. numpy-100's Game of Life lost its `Z` that way.

``generate(seed)`` writes a sequence of cells over a small pool of names, each cell drawn from
``CELLS`` (one function per construct). While it writes, it runs every candidate cell plainly
on the namespace so far, so each cell sees the real kinds of the names it uses (array of some
dtype and shape, scalar, list, function, unbound); a cell that raises is kept now and then (a
notebook goes on after an error) and dropped otherwise.

``check(shell, sequence)`` runs the sequence plainly from an empty namespace, then compiled
from an empty namespace, and returns the differences after each cell (names, values, dtypes,
types, stdout, the shown value, exceptions, NumPy's floating-point warnings), as
``tests/cells/harness.py`` compares them.
"""
from __future__ import annotations

import contextlib
import copy
import io
import random
import warnings
from dataclasses import dataclass, field

import numpy as np

NAMES = ("Z", "a", "x", "n")        # the pool rebinds; `Z` as numpy-100's Game of Life has it
SETUP = "import numpy as np"


@dataclass
class Sequence:
    seed: int
    cells: list = field(default_factory=list)

    def reproducer(self) -> str:
        parts = [f"# cell {i}\n%%compile\n{c}" for i, c in enumerate(self.cells)]
        return f"{SETUP}\n\n" + "\n\n".join(parts)


# -- values a name can be rebound to -------------------------------------------------------------

def _array_expr(r):
    shape = r.choice([(4,), (3, 4), (5, 5), (2, 3, 2), (6, 6), ()])
    size = int(np.prod(shape)) if shape else 1
    kind = r.choice(["float64", "int64", "float32", "int32", "bool"])
    base = f"np.arange({size})"
    if kind == "bool":
        expr = f"({base} % 3 == 0)"
    elif kind in ("float64", "float32"):
        expr = f"({base} * 0.25 - 1.0)"
        if kind == "float32":
            expr = f"{expr}.astype(np.float32)"
    else:
        expr = f"{base}" if kind == "int64" else f"{base}.astype(np.int32)"
    return f"{expr}.reshape({shape!r})"


def _value_expr(r):
    return r.choice([
        _array_expr, _array_expr, _array_expr,
        lambda r: repr(r.choice([0, 3, -2, 7])),
        lambda r: repr(r.choice([0.5, -1.25, 2.0])),
        lambda r: f"[{r.randint(0, 3)}, {r.randint(0, 3)}]",
        lambda r: repr("text"),
        lambda r: "None",
        lambda r: f"np.float64({r.choice([1.5, -2.0])})",
        lambda r: f"np.zeros(({r.randint(1, 4)}, {r.randint(1, 4)}), dtype=np.int64)",
    ])(r)


def _arrays(env):
    return [k for k in NAMES if isinstance(env.get(k), np.ndarray)]


def _other(r, name):
    return r.choice([k for k in NAMES if k != name])


# -- cells, one construct each ---------------------------------------------------------------------

def rebind(r, env):
    """A name rebound to a value of another kind (dtype, shape or type)."""
    name = r.choice(NAMES)
    return f"{name} = {_value_expr(r)}"


def rebind_from_itself(r, env):
    """A name read and rebound in one line: the new value depends on the old one."""
    arrays = _arrays(env) or list(NAMES)
    name = r.choice(arrays)
    op = r.choice(["* 2 + 1", "- 1", "+ 0.5", "// 2", "> 0"])
    return f"{name} = {name} {op}"


def augmented(r, env):
    name = r.choice(_arrays(env) or list(NAMES))
    return f"{name} {r.choice(['+=', '*=', '-='])} {r.choice(['1', '2', '3'])}"


def param_shadows_global(r, env):
    """numpy-100 exercise 88: a function whose parameter has a global's name writes into its
    argument, then the cell rebinds that global and calls the function."""
    name = r.choice(NAMES)
    other = _other(r, name)
    body = r.choice([f"    {name}[...] = 0\n    return {name}",
                     f"    {name} = {name} * 2\n    return {name}",
                     f"    return {name} + 1",
                     f"    {name}.fill(1)\n    return {name}"])
    call = r.choice([f"{name} = f({name})", f"{other} = f({name})",
                     f"for i in range(2): {name} = f({name})"])
    return (f"def f({name}):\n{body}\n\n"
            f"{name} = {_array_expr(r)}\n{call}\nprint({name}.dtype, {name}.shape)")


def lambda_reads_global(r, env):
    """A lambda that reads a global at call time; the cell rebinds it before calling."""
    name = r.choice(NAMES)
    other = _other(r, name)
    return (f"g = lambda t: t + {name}\n"
            f"{name} = {_array_expr(r)}\n"
            f"{other} = g({name})")


def loop_rebinds(r, env):
    name = r.choice(_arrays(env) or list(NAMES))
    return f"for i in range(3):\n    {name} = {name} * 2 - i"


def branch_rebinds(r, env):
    name = r.choice(NAMES)
    other = _other(r, name)
    return (f"if np.sum({name}) > 0:\n    {other} = {name} * 2\n"
            f"else:\n    {name} = {_value_expr(r)}")


def inplace_method_then_print(r, env):
    """An in-place ndarray method, then a later line that reads the array (issue 37 item 2)."""
    name = r.choice(NAMES)
    write = r.choice(["{n}.put([0, 1], [9, 8])", "{n}.fill(3)", "{n}.sort()", "{n}.sort(axis=0)",
                      "{n}.partition(1)", "{n}.clip(0, 1, out={n})", "{n}.byteswap(inplace=True)",
                      "{n}.resize((2, 2), refcheck=False)", "np.put({n}, [0], [7])",
                      "np.copyto({n}, 2)", "np.putmask({n}, {n} > 0, 5)", "{n}[...] = 1",
                      "np.negative({n}, out={n})", "np.add({n}, 1, {n})"])
    return (f"{name} = {_array_expr(r)}\n"
            f"{write.format(n=name)}\n"
            f"print({name})\n"
            f"{name}")


def delete(r, env):
    bound = [k for k in NAMES if k in env]
    if not bound:
        return None
    return f"del {r.choice(bound)}"


def show(r, env):
    """A cell that ends on an expression (its Out[] value)."""
    name = r.choice(NAMES)
    return r.choice([name, f"{name} * 1", f"type({name}).__name__", f"np.shape({name})"])


def def_then_use_later(r, env):
    """A function defined now that reads a global later cells rebind."""
    name = r.choice(NAMES)
    return f"def h(t):\n    return t * 2 + np.sum({name})\n\ny = h({_array_expr(r)})"


def call_earlier_function(r, env):
    fn = [k for k in ("f", "g", "h") if callable(env.get(k))]
    if not fn:
        return None
    name = r.choice(NAMES)
    return f"{r.choice(NAMES)} = {r.choice(fn)}({name})"


def warn(r, env):
    """A cell whose NumPy code warns (issue 37 item 3): log of zeros and negatives, an overflow,
    0/0, some of it under np.errstate; the warnings are compared (category, message, line)."""
    name = r.choice(NAMES)
    other = _other(r, name)
    expr = r.choice(["np.log({a})", "np.sqrt({a} - 1)", "1.0 / ({a} * 0)", "np.exp({a} * 1000.0)",
                     "np.square({a} * 1e200) + 1", "({a} - {a}) / ({a} - {a})", "{a} ** 2 * 1e300"])
    line = f"{other} = {expr.format(a=name)}"
    if r.random() < 0.3:
        line = f"with np.errstate({r.choice(['divide', 'over', 'invalid'])}='ignore'):\n    {line}"
    return f"{name} = {_array_expr(r)}\n{line}\nprint({other}.dtype)"


def bind_view(r, env):
    """A view of an array bound to a name, written through in the same cell now and then: after
    the cell the two names share memory as NumPy's do, so a later cell's write into either
    (write_shared) shows through both (a compiled cell handed back copies before)."""
    arrays = [k for k in _arrays(env) if env[k].ndim]
    base = r.choice(arrays) if arrays else r.choice(NAMES)
    name = _other(r, base)
    make = "" if arrays else f"{base} = {_array_expr(r)}\n"
    view = r.choice(["{b}[1:]", "{b}[::2]", "{b}.T", "{b}.reshape(-1)", "{b}[...]", "{b}[:1]",
                     "{b}[::-1]", "np.ravel({b})", "{b}[None]"])
    src = f"{make}{name} = {view.format(b=base)}"
    if r.random() < 0.4:
        src += f"\n{r.choice([name, base])} {r.choice(['+=', '*='])} {r.choice(['1', '2'])}"
    return src


def write_shared(r, env):
    """A write into an array that may be a view or a view's base; every name is compared after
    the cell, so the other side of the view is read too."""
    name = r.choice(_arrays(env) or list(NAMES))
    write = r.choice(["{n} += 1", "{n}[...] = 7", "{n}.fill(2)", "np.copyto({n}, 5)",
                      "{n} *= 3", "{n}[:1] = -1", "np.negative({n}, out={n})", "np.add({n}, 1, {n})"])
    return f"{write.format(n=name)}\nprint({name})"


HOLDER = "L"        # the name of the container that holds views (the pool above never rebinds it)


def bind_container_view(r, env):
    """Views of an array held in a list, tuple or dict (or np.split's pieces, an array's rows),
    written through in the same cell now and then. The views handed back share memory with
    their base; a later cell that names the base and reaches the views through the container
    runs them untraced (write_container_view), which the trace must keep in step."""
    arrays = [k for k in _arrays(env) if env[k].ndim]
    base = r.choice(arrays) if arrays else r.choice(NAMES)
    make = "" if arrays else f"{base} = {_array_expr(r)}\n"
    hold = r.choice(["[{b}[1:], {b}[::2]]", "({b}[:1], {b}.T)", "{{'v': {b}[::-1], 'w': [{b}[...]]}}",
                     "np.split({b}.reshape(-1), 2)", "list({b})", "[{b}.reshape(-1)]",
                     "{{'v': {b}[None]}}"])
    src = f"{make}{HOLDER} = {hold.format(b=base)}"
    if r.random() < 0.4:
        src += f"\n{base} {r.choice(['+=', '*='])} {r.choice(['1', '2'])}"
    return src


def _held_arrays(env):
    """Expressions for the arrays the container holds at its top level (``L[0]``, ``L['v']``)."""
    held = env.get(HOLDER)
    if isinstance(held, dict):
        return [f"{HOLDER}[{k!r}]" for k, v in held.items() if isinstance(v, np.ndarray)]
    if isinstance(held, (list, tuple)):
        return [f"{HOLDER}[{i}]" for i, v in enumerate(held) if isinstance(v, np.ndarray)]
    return []


def write_container_view(r, env):
    """A cell that names an array and reaches a view of it through the container: a traced write
    into the base then a plain read of the view, a plain write through the view after a traced
    read of the base, or reads alone (which still compile)."""
    held = _held_arrays(env)
    arrays = _arrays(env)
    if not held or not arrays:
        return None
    e, name = r.choice(held), r.choice(arrays)
    return r.choice([
        f"{name} += 1\nprint({HOLDER})",
        f"{name}[...] = 3\nprint({e})",
        f"y = {name} * 2\n{r.choice(['{e} += 1', '{e}[...] = 7', '{e}.fill(2)', 'np.copyto({e}, 5)'])}"
        f"\nprint(y)".format(e=e),
        f"y = {e} * 1 + np.sum({name})\nprint(y)",
        f"{e} *= 3\nprint({name})",
    ])


CELLS = {
    "bind_view": (bind_view, 2),
    "bind_container_view": (bind_container_view, 2),
    "write_container_view": (write_container_view, 2),
    "write_shared": (write_shared, 2),
    "rebind": (rebind, 4),
    "warn": (warn, 2),
    "rebind_from_itself": (rebind_from_itself, 3),
    "augmented": (augmented, 2),
    "param_shadows_global": (param_shadows_global, 3),
    "lambda_reads_global": (lambda_reads_global, 2),
    "loop_rebinds": (loop_rebinds, 2),
    "branch_rebinds": (branch_rebinds, 2),
    "inplace_method_then_print": (inplace_method_then_print, 2),
    "delete": (delete, 1),
    "show": (show, 2),
    "def_then_use_later": (def_then_use_later, 1),
    "call_earlier_function": (call_earlier_function, 2),
}
FP_WARNING = r"(divide by zero|overflow|underflow|invalid value) encountered in "
KEEP_ERROR = 0.15       # how often a cell that raises stays in the sequence


def run_plain(source, env):
    """Run one cell plainly on ``env`` (a dict namespace): None, or the exception it raised."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings(), \
                contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            exec(compile(source, "<cell>", "exec"), env)
    except Exception as e:     # noqa: BLE001  (any user exception: the cell raised)
        return e
    return None


def generate(seed: int, cells: int | None = None) -> Sequence:
    r = random.Random(seed)
    n = cells or r.randint(3, 7)
    env = {"np": np, "__name__": "__main__"}
    seq = Sequence(seed)
    kinds = list(CELLS)
    weights = [CELLS[k][1] for k in kinds]
    tries = 0
    while len(seq.cells) < n and tries < 20 * n:
        tries += 1
        maker = CELLS[r.choices(kinds, weights)[0]][0]
        src = maker(r, env)
        if src is None:
            continue
        trial = dict(env)
        trial.update({k: copy.copy(v) for k, v in env.items() if isinstance(v, np.ndarray)})
        err = run_plain(src, trial)
        if err is not None and r.random() > KEEP_ERROR:
            continue
        env = trial
        seq.cells.append(src)
    return seq


# -- running and comparing -------------------------------------------------------------------------

def _snapshot(outcome):
    """The outcome with its names copied (a later cell may write into an array in place)."""
    names = {}
    for k, v in outcome.names.items():
        try:
            names[k] = copy.deepcopy(v)
        except Exception:      # noqa: BLE001  (modules, generators: compared by type only)
            names[k] = v
    outcome.names = names
    return outcome


def _run_all(shell, seq, compiled):
    from tests.cells import harness
    from tests.cells.catalogue import Cell
    outs = []
    harness._fresh(shell, SETUP)
    for src in seq.cells:
        cell = Cell(name=f"seq{seq.seed}", source=src, setup=SETUP)
        outs.append(_snapshot(harness.run(shell, cell, compiled=compiled, fresh=False)))
    return outs


def check(shell, seq, traced=True) -> list[str]:
    """Every difference between the plain and the compiled run of ``seq``, cell by cell.
    ``traced``: the cheap path is off, so every cell is traced (small cells would otherwise run
    as plain NumPy, which is what a user gets but tests little of the compiled path)."""
    import nbaccel
    from tests.cells import harness
    saved = nbaccel.config["cheap_enabled"]
    with warnings.catch_warnings():
        # NumPy's floating-point warnings as a notebook shows them, the rest silenced
        warnings.simplefilter("ignore")
        warnings.filterwarnings("default", category=RuntimeWarning, message=FP_WARNING)
        plain = _run_all(shell, seq, compiled=False)
        nbaccel.config["cheap_enabled"] = not traced
        try:
            comp = _run_all(shell, seq, compiled=True)
        finally:
            nbaccel.config["cheap_enabled"] = saved
    out = []
    for i, (p, c) in enumerate(zip(plain, comp)):
        out += [f"cell {i}: {d}" for d in harness.differences(p, c)]
    return out

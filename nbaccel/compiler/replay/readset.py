"""What a traced function read: the guards that let a later call replay without re-tracing.

Re-tracing on every call is never stale, but a Python tracer costs tens of µs per op, so a
compiled function was slower than plain NumPy below ~256². TorchDynamo's answer is guards on
what the code read. nbaccel gets the same from two sources, both cheap:

* **which code ran** — :class:`~nbaccel.compiler.replay.read_recorder.ReadRecorder` watches the first trace with ``sys.setprofile``:
  every Python code object that ran, every C function a user frame called, and every draw
  from a random generator anywhere (nbaccel's own random ops draw at trace time, so a graph
  that drew is never replayed);
* **what that code reads** — :func:`analyse` walks the bytecode of the user's code objects
  (``dis``): each ``LOAD_GLOBAL`` / closure cell / ``self`` read and the attribute and
  constant-subscript chain after it (``np.tanh``, ``cfg.scale``, ``CFG["lr"]``,
  ``self.w``) becomes a guard on the chain's current value: identity for modules,
  functions, classes and arrays (plus their shape, dtype and strides), the value for Python
  scalars. Functions, methods and classes found this way are walked in turn.

A read that cannot be guarded cheaply (a list, a dict, an arbitrary object handed on whole),
a write to global state, a call to a C function that is not known to be pure (``print``,
``time.time``, ``list.append``), or code that ran but was not reached by the walk makes the
function *re-trace every call*, and :class:`Unguardable` carries the reason the report shows.
Guards are evaluated on every call before the replay (a few hundred ns each); any difference
re-traces, and the failing guard's description becomes the re-trace reason.
"""
from __future__ import annotations

import builtins
import dis
import os
import types

import numpy as np

from ...tensor import Tensor
from .read_recorder import ReadRecorder, _draws_random, _is_user
from .compiled import Compiled
from ...optim import Optimizer
from ...parameter_holder import ParameterHolder   # an nn.Module, known without importing nn

_IMMUTABLE_SCALARS = (bool, int, float, complex, str, bytes, type(None), type(...), slice, range, np.generic)


class Unguardable(Exception):
    """The function re-traces every call; ``str(exc)`` says why (shown in the report)."""


# ---- guards ----------------------------------------------------------------------------------

_RAISES = object()


class Guard:
    """One read: a root (a globals dict, a closure cell or an object) and a chain of
    attribute / constant-subscript steps; ``check()`` says whether its value is unchanged."""

    __slots__ = ("where", "root", "steps", "expect", "desc")

    def __init__(self, where, root, steps, desc):
        self.where = where          # 'global' | 'cell' | 'object'
        self.root = root
        self.steps = steps
        self.desc = desc
        self.expect = None

    def value(self):
        if self.where == "global":
            g, name = self.root
            v = g.get(name, _RAISES)
            if v is _RAISES:
                v = builtins.__dict__.get(name, _RAISES)
                if v is _RAISES:
                    return v
        elif self.where == "cell":
            try:
                v = self.root.cell_contents
            except ValueError:
                return _RAISES
        elif self.where == "env":           # a %%compile cell's inputs object, new on every run
            v = self.root[0]
        else:
            v = self.root
        try:
            for kind, key in self.steps:
                v = getattr(v, key) if kind == "attr" else v[key]
        except Exception:
            return _RAISES
        return v

    def check(self):
        return _matches(self.value(), self.expect)


def same_scalar(v, w) -> bool:
    """Whether two values of one immutable type are the same value to the code: equal, and for
    a zero (or any complex) the same signs too, since 0.0 == -0.0 while 1 / -0.0 is -inf (a
    replay guarded on == alone handed back inf); two NaNs are the same value."""
    if v != w:
        return v != v and w != w
    if v and not isinstance(v, (complex, np.complexfloating)):
        return True
    return repr(v) == repr(w)


def _matches(v, spec):
    kind = spec[0]
    if kind == "is":
        return v is spec[1]
    if kind == "eq":
        return type(v) is spec[1] and same_scalar(v, spec[2])
    if kind == "array":
        return v is spec[1] and v.shape == spec[2] and v.dtype == spec[3] and v.strides == spec[4]
    if kind == "array-values":
        return v is spec[1] and v.shape == spec[2] and v.dtype == spec[3] and \
            np.array_equal(v, spec[4], equal_nan=v.dtype.kind in "fc")
    if kind == "tensor":
        return v is spec[1] and v.shape == spec[2] and v.dtype is spec[3] and v.requires_grad == spec[4]
    if kind == "method":
        return type(v) is types.MethodType and v.__func__ is spec[1] and v.__self__ is spec[2]
    if kind == "tmethod":
        return type(v) is types.MethodType and v.__func__ is spec[1] and _matches(v.__self__, spec[2])
    if kind == "bmethod":
        owner = getattr(v, "__self__", None)
        return owner is spec[1] and getattr(v, "__name__", None) == spec[2] and _matches(owner, spec[3])
    if kind == "tuple":
        return v is spec[1] and all(_matches(x, s) for x, s in zip(v, spec[2]))
    if kind == "raises":
        return v is _RAISES
    return False


def describe(v) -> str:
    if isinstance(v, (np.ndarray, Tensor)):
        return f"{type(v).__name__}{tuple(v.shape)} {v.dtype}"
    if v is _RAISES:
        return "<missing>"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


class ReadSet:
    """Every guard of one traced function, plus the code objects the walk reached."""

    def __init__(self):
        self.guards: list[Guard] = []
        self.codes: set = set()
        self.modules: list = []         # nn.Modules / Optimizers reached (their own key guards them)
        self._seen: set = set()
        self.env = [None]               # a cell's inputs object for this call (ENV_ARG)
        self.ran = None                 # the code objects the trace ran (the recorder's), if known

    def failing(self, env=None):
        """The first guard whose value changed, or None (all hold). ``env``: the inputs object
        a %%compile cell's function got on this call."""
        self.env[0] = env
        for g in self.guards:
            if not g.check():
                return g
        return None


VALUE_GUARD_ELEMENTS = 1 << 16      # a global array read outside the graph: guard its values up to this size


def guard_array_values(rs, graph_buffers, called):
    """A global array the code used outside the compiled graph (``W.sum()``, ``np.tanh(W)`` on
    the concrete array) went into the graph as a constant computed from its values: guard the
    values (a copy, for small arrays) or refuse. Arrays that are graph inputs are read live."""
    for g in rs.guards:
        spec = g.expect
        if spec[0] != "array" or (id(spec[1]) in graph_buffers and id(spec[1]) not in called):
            continue
        if spec[1].size > VALUE_GUARD_ELEMENTS:
            raise Unguardable(f"computes with the global array `{g.desc}` outside the compiled graph")
        g.expect = ("array-values",) + spec[1:4] + (spec[1].copy(),)


def analyse(fn, recorder: ReadRecorder | None = None, env=None) -> ReadSet:
    """The guards for ``fn`` (raises :class:`Unguardable` with the reason when there are none).
    ``env``: the inputs object of the traced call, for a %%compile cell's function."""
    rs = ReadSet()
    rs.env[0] = env
    if recorder is not None:
        rs.ran = recorder.codes
    while isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.MethodType):
        fn = fn.__func__
    if isinstance(fn, types.MethodType):
        _spec(rs, fn, getattr(fn, "__qualname__", "the method"))    # its self: a module, or walked
    elif isinstance(fn, types.FunctionType):
        _walk_function(rs, fn, None)
    else:
        raise Unguardable(f"the compiled callable is a {type(fn).__name__}, whose reads nbaccel "
                          "does not follow")
    if recorder is not None:
        if recorder.refusal:
            raise Unguardable(recorder.refusal)
        missed = [c for c in recorder.codes if c not in rs.codes]
        if missed:
            c = missed[0]
            raise Unguardable(f"runs `{c.co_name}` ({os.path.basename(c.co_filename)}:"
                              f"{c.co_firstlineno}), reached in a way nbaccel cannot guard")
    return rs


def _walk_function(rs, fn, self_obj):
    key = (id(fn), id(self_obj))
    if key in rs._seen:
        return
    rs._seen.add(key)
    code = fn.__code__
    if not _is_user(code):
        return
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    for attr in ("__defaults__", "__kwdefaults__"):
        if getattr(fn, attr, None):
            _guard(rs, Guard("object", fn, (("attr", attr),), f"{fn.__qualname__}.{attr}"))
    _walk_code(rs, code, fn.__globals__, cells, self_obj)


ENV_ARG = "__nbaccel_env__"      # (magics/cellfunc.ENV) the argument holding a cell's other inputs


def _walk_code(rs, code, globs, cells, self_obj, self_name=None):
    rs.codes.add(code)
    if self_name is None and self_obj is not None and code.co_argcount:
        self_name = code.co_varnames[0]
    ins = _instructions(code)
    i, n = 0, len(ins)
    while i < n:
        op, arg = ins[i]
        root = None
        if op == "LOAD_FAST" and arg == ENV_ARG and ENV_ARG in code.co_varnames[:code.co_argcount]:
            # a cell's inputs: `env.values["name"]` is guarded on this call's object; its other
            # attributes (collect, outputs) are the same for every run of the entry
            if i + 3 < n and ins[i + 1] == ("LOAD_ATTR", "values") and ins[i + 2][0] == "LOAD_CONST" \
                    and ins[i + 3][0] == "BINARY_SUBSCR":
                key = ins[i + 2][1]
                g = Guard("env", rs.env, (("attr", "values"), ("item", key)), str(key))
                i += 4
                if i < n and ins[i] == ("STORE_FAST", key) and _dead_store(code, ins, i, key):
                    i += 1          # the value a cell output had before: overwritten unread
                    continue
                steps = []
                while i < n and ins[i][0] in ("LOAD_ATTR", "LOAD_METHOD"):
                    steps.append(("attr", ins[i][1]))
                    i += 1
                g.steps += tuple(steps)
                g.desc = str(key) + "".join(f".{k}" for _, k in steps)
                _guard(rs, g)
                continue
            i += 1
            continue
        if op in ("LOAD_GLOBAL", "LOAD_NAME"):
            root, desc = Guard("global", (globs, arg), (), arg), arg
        elif op in ("LOAD_DEREF", "LOAD_CLASSDEREF") and arg in cells:
            root, desc = Guard("cell", cells[arg], (), arg), arg
        elif op in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLASSDEREF") and arg == self_name and arg is not None:
            root, desc = Guard("object", self_obj, (), arg), arg
        elif op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            raise Unguardable(f"writes the global `{arg}`")
        elif op in ("STORE_DEREF", "DELETE_DEREF") and arg in cells:
            raise Unguardable(f"rebinds `{arg}` of an enclosing function (nonlocal)")
        elif op in ("STORE_ATTR", "DELETE_ATTR"):
            prev = ins[i - 1] if i else (None, None)
            if prev[0] != "LOAD_FAST" or prev[1] == self_name:
                raise Unguardable(f"sets the attribute `{arg}` of an object it did not create")
        elif op == "LOAD_CONST" and isinstance(arg, types.CodeType):
            # a nested def, lambda or comprehension: same globals; its free variables are the
            # enclosing function's cells (guarded here) or its locals (fresh on every call)
            inner = {v: cells[v] for v in arg.co_freevars if v in cells}
            inner_self = self_name if self_name in arg.co_freevars else None
            _walk_code(rs, arg, globs, inner, self_obj if inner_self else None, inner_self)
        if root is None:
            i += 1
            continue
        steps = []
        i += 1
        while i < n:
            op2, arg2 = ins[i]
            if op2 in ("LOAD_ATTR", "LOAD_METHOD"):
                steps.append(("attr", arg2))
                i += 1
            elif op2 == "LOAD_CONST" and i + 1 < n and ins[i + 1][0] == "BINARY_SUBSCR" and \
                    isinstance(arg2, (str, int, bytes)):
                steps.append(("item", arg2))
                i += 2
            else:
                break
        root.steps = tuple(steps)
        root.desc = desc + "".join(f".{k}" if kind == "attr" else f"[{k!r}]" for kind, k in steps)
        _guard(rs, root)


_UNCONDITIONAL = {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP"}
_ENDS = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"}
_JUMPS = set(dis.hasjrel) | set(dis.hasjabs)


def _dead_store(code, ins, i, name) -> bool:
    """Whether the value stored into the local ``name`` at ``ins[i]`` is never read: on every
    path from there (jumps followed, loops once) ``name`` is stored again before any load. A
    function with exception handlers is not analysed (a handler may read it)."""
    if code.co_exceptiontable:
        return False
    full = _full_instructions(code)
    at = {x.offset: k for k, x in enumerate(full)}
    start = full[i].offset
    todo, seen = [at[start] + 1], set()
    while todo:
        k = todo.pop()
        while k < len(full) and k not in seen:
            seen.add(k)
            x = full[k]
            if x.argval == name and x.opname in ("LOAD_FAST", "LOAD_FAST_CHECK", "DELETE_FAST",
                                                  "LOAD_CLOSURE", "LOAD_DEREF"):
                return False
            if x.argval == name and x.opname == "STORE_FAST":
                break                                   # this path overwrote it unread
            if x.opname in _ENDS:
                break
            if x.opcode in _JUMPS:                      # (FOR_ITER too: the loop may end at once)
                target = at.get(x.argval)
                if target is not None:
                    todo.append(target)
                if x.opname in _UNCONDITIONAL:
                    break
            k += 1
    return True


def _full_instructions(code):
    full = _FULL.get(code)
    if full is None:
        full = _FULL[code] = list(dis.get_instructions(code))
    return full


_FULL: dict = {}
_INSTR: dict = {}


def _instructions(code):
    ins = _INSTR.get(code)
    if ins is None:
        ins = _INSTR[code] = [(x.opname, x.argval) for x in dis.get_instructions(code)]
    return ins


def _guard(rs, g: Guard):
    v = g.value()
    g.expect = _spec(rs, v, g.desc)
    rs.guards.append(g)


def _spec(rs, v, desc, depth=0):
    if v is _RAISES:
        return ("raises",)
    if isinstance(v, _IMMUTABLE_SCALARS):
        return ("eq", type(v), v)
    if _draws_random(v):
        raise Unguardable(f"draws random numbers through `{desc}` (each call must draw new ones)")
    if isinstance(v, np.ndarray):
        return ("array", v, v.shape, v.dtype, v.strides)
    if isinstance(v, Tensor):
        return ("tensor", v, tuple(v.shape), v.dtype, v.requires_grad)
    if isinstance(v, tuple) and depth < 3:
        return ("tuple", v, tuple(_spec(rs, x, desc, depth + 1) for x in v))
    if isinstance(v, types.FunctionType):
        _walk_function(rs, v, None)
        return ("is", v)
    if isinstance(v, types.MethodType):
        owner = v.__self__
        if isinstance(owner, (ParameterHolder, Optimizer)):
            _add_module(rs, owner)          # its parameters, buffers and flags: Snapshot's key
        elif isinstance(owner, type):
            _walk_class(rs, owner)          # a classmethod
        elif isinstance(owner, Tensor) and isinstance(v.__func__, types.FunctionType) \
                and not _is_user(v.__func__.__code__):
            # ``y.reshape(-1)`` on a global or closure tensor: nbaccel's method, guarded as the
            # tensor is (its values are a graph input; one read into Python never replays)
            return ("tmethod", v.__func__, _spec(rs, owner, desc, depth + 1))
        elif not (isinstance(v.__func__, types.FunctionType) and _is_user(v.__func__.__code__)):
            raise Unguardable(f"calls `{desc}`, a method of a {type(owner).__name__} whose state "
                              "nbaccel does not follow")
        if isinstance(v.__func__, types.FunctionType):
            _walk_function(rs, v.__func__, owner)
        return ("method", v.__func__, owner)
    if isinstance(v, types.BuiltinMethodType) and not isinstance(v.__self__, types.ModuleType) \
            and v.__self__ is not None:
        owner = v.__self__                  # a C method bound to an object: a new one per access
        if isinstance(owner, np.ndarray):
            return ("bmethod", owner, v.__name__, _spec(rs, owner, desc, depth + 1))
        if isinstance(owner, (type, np.ufunc, str, bytes, int, float, tuple, frozenset)):
            return ("bmethod", owner, v.__name__, ("is", owner))
        raise Unguardable(f"reads `{desc}`, a method of a {type(owner).__name__}, which cannot be "
                          "guarded cheaply")
    if isinstance(v, type):
        _walk_class(rs, v)
        return ("is", v)
    if isinstance(v, (ParameterHolder, Optimizer)):
        _add_module(rs, v)
        return ("is", v)
    if isinstance(v, types.ModuleType) or _library_object(v):
        return ("is", v)
    if isinstance(v, Compiled):         # another nb.compile'd function: traced inline, walked too
        _spec(rs, v._target_fn(), desc, depth + 1)
        return ("is", v)
    raise Unguardable(f"reads `{desc}` (a {type(v).__name__}), which cannot be guarded cheaply")


def _library_object(v) -> bool:
    """Functions, ufuncs, dtypes and other objects that library code defines (never mutated
    by a notebook in ways that change what a call computes)."""
    if isinstance(v, (types.BuiltinFunctionType, np.ufunc, np.dtype, types.BuiltinMethodType,
                      staticmethod, classmethod, property)):
        return True
    mod = getattr(type(v), "__module__", "") or ""
    return (mod.startswith("numpy") and callable(v)) or mod == "nbaccel.dtypes"


def _walk_class(rs, cls):
    for klass in cls.__mro__:
        if id(klass) in rs._seen:
            continue
        rs._seen.add(id(klass))
        for attr in vars(klass).values():
            f = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
            if isinstance(f, property):
                for acc in (f.fget, f.fset, f.fdel):
                    if isinstance(acc, types.FunctionType):
                        _walk_function(rs, acc, None)
            elif isinstance(f, types.FunctionType):
                _walk_function(rs, f, None)


def _add_module(rs, obj):
    if id(obj) in rs._seen:
        return
    rs._seen.add(id(obj))
    rs.modules.append(obj)
    mods = obj.modules() if isinstance(obj, ParameterHolder) else ()
    for m in mods:
        # a module's methods read ``self``: walk them rooted at this instance (those the trace
        # ran, where that is known: a user module's ``__init__`` sets attributes, but a step
        # never runs it, and a method that did not run made nothing the replay repeats)
        for klass in type(m).__mro__:
            for name, attr in vars(klass).items():
                if isinstance(attr, types.FunctionType) and _is_user(attr.__code__) and \
                        (rs.ran is None or attr.__code__ in rs.ran):
                    _walk_function(rs, attr, m)

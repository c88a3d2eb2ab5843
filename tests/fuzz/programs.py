"""Random NumPy programs for differential testing of the compiler.

A program is the source text of a Python function over ``np``, for example::

    def program(a0, a1):
        t0 = a0[:, None] - a1[None, :]     # pairwise: (3, 4) with (2, 4)
        t1 = t0.sum(axis=(0, 2), keepdims=True)   # reduce: sum
        return (t1, t0)

Each statement comes from one rule of ``rules.py`` (the comment names it). The generator
runs every candidate statement on the program's concrete inputs with NumPy as it goes, so
it knows each variable's shape and dtype, and it keeps only statements that NumPy accepts,
except that with probability ``KEEP_ERROR`` a statement NumPy rejects ends the program: the
compiled call must then raise the same exception type.

Everything is a function of the seed: ``generate(seed)`` always builds the same program,
with the same input values.
"""
from __future__ import annotations

import dataclasses
import linecache
import random
import re
import warnings
from dataclasses import dataclass

import numpy as np

from . import rules

DTYPES = ("float32", "float64", "int32", "int64", "bool")
DTYPE_WEIGHTS = (3, 2, 2, 2, 2)
NDIM_WEIGHTS = (1, 3, 4, 3, 2)           # how often an input has 0, 1, 2, 3, 4 dims
DIM_SIZES = (0, 1, 2, 3, 4)
DIM_WEIGHTS = (1, 5, 5, 4, 3)           # size-0 and size-1 dims are the edge cases
# Quarter steps are exact in float32: sums and products of a few of them stay exact, so a
# compiled kernel that adds in another order still gives the same comparisons and ties.
FLOAT_GRID = np.arange(-8, 9) / 4
KEEP_ERROR = 0.25                        # chance that a statement NumPy rejects ends the program
MAX_STATEMENTS = 8


@dataclass(frozen=True)
class Input:
    """A parameter of the program: its values are drawn from its own seed."""
    name: str
    shape: tuple
    dtype: str
    seed: int

    def value(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        if self.dtype == "bool":
            data = rng.random(self.shape) < 0.5
        elif self.dtype.startswith("int"):
            data = rng.integers(-3, 4, self.shape)
        else:
            data = rng.choice(FLOAT_GRID, self.shape)
        return np.asarray(data, dtype=self.dtype)


@dataclass(frozen=True)
class Statement:
    code: str          # one line of Python, e.g. "t2 = t0.sum(axis=1)"
    rule: str          # the rule that wrote it
    note: str = ""     # what the rule chose (a broadcasting pattern, a reduction op)


@dataclass(frozen=True)
class Program:
    seed: int
    inputs: tuple
    statements: tuple
    outputs: tuple
    single: bool = False     # return outputs[0] itself rather than a tuple

    @property
    def filename(self) -> str:
        return f"<fuzz program {self.seed}>"

    def source(self, order_global: bool = False) -> str:
        """The program's text. ``order_global``: it reads the global ``ORDER`` and returns its
        results reversed when it is 0 (the guard tests change it between calls)."""
        lines = [f"def program({', '.join(i.name for i in self.inputs)}):"]
        for s in self.statements:
            comment = f"{s.rule}: {s.note}" if s.note else s.rule
            lines.append(f"    {s.code:<40}  # {comment}")
        if self.single:
            lines.append(f"    return {self.outputs[0]}")
        elif order_global:
            outs, rev = ", ".join(self.outputs), ", ".join(reversed(self.outputs))
            comma = "," if len(self.outputs) == 1 else ""
            lines.append(f"    return ({outs}{comma}) if ORDER else ({rev}{comma})")
        else:
            lines.append(f"    return ({', '.join(self.outputs)}{',' if len(self.outputs) == 1 else ''})")
        return "\n".join(lines) + "\n"

    def function(self, order_global: bool = False):
        """The program as a function (its source is in linecache, so tracebacks show it)."""
        src = self.source(order_global)
        linecache.cache[self.filename] = (len(src), None, src.splitlines(True), self.filename)
        namespace = {"np": np, "ORDER": 1}
        exec(compile(src, self.filename, "exec"), namespace)
        return namespace["program"]

    def arrays(self) -> list:
        """Fresh input arrays (a program may not mutate them, but each run gets its own)."""
        return [i.value() for i in self.inputs]

    def replace(self, **changes) -> "Program":
        return dataclasses.replace(self, **changes)

    def size(self) -> int:
        """How big a reproducer is (fewer statements first, then shorter text)."""
        return len(self.statements) * 1000 + len(self.inputs) * 100 + len(self.source())

    def reproducer(self, backend: str = "numba") -> str:
        """A standalone script that runs the program plainly and compiled."""
        lines = ["import numpy as np", "import nbaccel as nb", ""]
        for i, a in zip(self.inputs, self.arrays()):
            lines.append(f"{i.name} = np.array({a.ravel().tolist()!r}, dtype=np.{i.dtype})"
                         f".reshape({i.shape!r})")
        lines += ["", self.source().rstrip(), ""]
        args = ", ".join(i.name for i in self.inputs)
        lines.append(f"print(program({args}))")
        lines.append(f"print(nb.compile(program, backend={backend!r})({args}))")
        return "\n".join(lines) + "\n"


def run_statements(env: dict, statements) -> BaseException | None:
    """Execute statements in env (NumPy warnings off); return the exception, if one."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in statements:
            try:
                exec(s.code, env)
            except Exception as e:     # noqa: BLE001 - any NumPy error is a valid outcome
                return e
    return None


class Builder:
    """The state a rule sees: variables with their concrete values, and a random source."""

    def __init__(self, seed: int, weights: dict):
        self.seed = seed
        self.rng = random.Random(seed)
        self.weights = weights
        self.inputs: list = []
        self.statements: list = []
        self.vars: list = []            # input and temporary names, in order of creation
        self.env: dict = {"np": np}     # name -> value after the statements so far
        self._next_temp = 0

    # -- what rules use --------------------------------------------------------------------
    def shape(self, name) -> tuple:
        return tuple(np.shape(self.env[name]))

    def dtype(self, name) -> np.dtype:
        return np.asarray(self.env[name]).dtype

    def random_shape(self, ndim=None) -> tuple:
        if ndim is None:
            ndim = self.rng.choices(range(5), NDIM_WEIGHTS)[0]
        return tuple(self.rng.choices(DIM_SIZES, DIM_WEIGHTS, k=ndim))

    def size(self) -> int:
        """A random dimension size (0 and 1 included)."""
        return self.rng.choices(DIM_SIZES, DIM_WEIGHTS)[0]

    def new_input(self, shape=None, dtype=None) -> str:
        shape = self.random_shape() if shape is None else tuple(shape)
        dtype = dtype or self.rng.choices(DTYPES, DTYPE_WEIGHTS)[0]
        inp = Input(f"a{len(self.inputs)}", shape, dtype, seed=self.seed * 97 + len(self.inputs))
        self.inputs.append(inp)
        self.vars.append(inp.name)
        self.env[inp.name] = inp.value()
        return inp.name

    def operand(self, fresh: float = 0.15) -> str:
        """An existing variable (recent temporaries more often, so chains grow deep) or, with
        probability fresh, a new input."""
        if not self.vars or self.rng.random() < fresh:
            return self.new_input()
        weights = [1 + 3 * (i >= len(self.vars) - 3) + 2 * self.is_temp(v)
                   for i, v in enumerate(self.vars)]
        return self.rng.choices(self.vars, weights)[0]

    def operand_of_shape(self, shape, reuse: float = 0.5) -> str:
        """A variable of exactly this shape, an existing one when there is one and reuse says so."""
        same = [v for v in self.vars if self.shape(v) == tuple(shape)]
        if same and self.rng.random() < reuse:
            return self.rng.choice(same)
        return self.new_input(shape)

    def temp(self) -> str:
        """A fresh name for a rule's result."""
        name = f"t{self._next_temp}"
        self._next_temp += 1
        return name

    def is_temp(self, name) -> bool:
        return name.startswith("t")

    def aliases_input(self, name) -> bool:
        v = self.env[name]
        return any(isinstance(v, np.ndarray) and np.shares_memory(v, self.env[i.name])
                   for i in self.inputs)

    # -- one step of generation --------------------------------------------------------------
    def attempt(self, rule_name: str, keep_error: bool) -> str:
        """Run one rule: "ok" (its statement is kept), "skip" (it does not apply here),
        "rejected" (NumPy raised; the builder is as before) or "error" (NumPy raised and
        keep_error said to end the program with that statement)."""
        saved = (len(self.inputs), list(self.vars), dict(self.env), self._next_temp)
        written = rules.RULES[rule_name](self)
        if written is None:
            self._restore(saved)
            return "skip"
        code, note = written
        stmt = Statement(code, rule_name, note)
        env = dict(self.env)
        if run_statements(env, [stmt]) is None:
            self.statements.append(stmt)
            self.env = env
            target = code.split("=")[0].strip()
            if target.isidentifier() and target not in self.vars:
                self.vars.append(target)
            return "ok"
        if keep_error:
            self.statements.append(stmt)
            return "error"
        self._restore(saved)
        return "rejected"

    def _restore(self, saved):
        n_inputs, self.vars, self.env, self._next_temp = saved
        del self.inputs[n_inputs:]


def generate(seed: int, weights: dict | None = None, return_all: bool = False) -> Program:
    """The program of this seed; weights (rule name -> weight) choose which constructs appear.
    return_all returns every intermediate (no unused ones)."""
    weights = rules.WEIGHTS if weights is None else weights
    names = [n for n, w in weights.items() if w > 0]
    if not names:
        raise ValueError("every rule has weight 0")
    b = Builder(seed, weights)
    target = b.rng.randint(1, MAX_STATEMENTS)
    ended_by_error = False
    for _ in range(6 * MAX_STATEMENTS):
        if len(b.statements) >= target:
            break
        rule = b.rng.choices(names, [weights[n] for n in names])[0]
        if b.attempt(rule, keep_error=b.rng.random() < KEEP_ERROR) == "error":
            ended_by_error = True
            break
    if not b.inputs:
        b.new_input()
    temps = [v for v in b.vars if b.is_temp(v)] or [b.inputs[0].name]
    if ended_by_error:
        # the failing statement never binds its target: return what exists before it
        failing = b.statements[-1].code.split("=")[0].strip()
        temps = [v for v in temps if v != failing] or [b.inputs[0].name]
    k = b.rng.randint(1, min(3, len(temps)))
    outputs = [temps[-1]] + b.rng.sample(temps[:-1], k - 1)
    b.rng.shuffle(outputs)
    if return_all:
        outputs, k = temps, len(temps)
    single = k == 1 and b.rng.random() < 0.4
    used = [i for i in b.inputs if _mentions(b.statements, outputs, i.name)] or b.inputs[:1]
    return Program(seed, tuple(used), tuple(b.statements), tuple(outputs), single)


def _mentions(statements, outputs, name) -> bool:
    pattern = re.compile(rf"\b{name}\b")
    return name in outputs or any(pattern.search(s.code) for s in statements)

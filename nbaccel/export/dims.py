"""Symbolic dimensions: ``Dim``, the ``dynamic_shapes`` argument, and sizes as polynomials.

nbaccel's shapes are concrete ints, so export finds how the graph depends on a dynamic dim by
tracing the function again at other sizes of it (probes) and fitting every integer of the
graph that changes (a reshape's target shape, a division by ``x.shape[0]``, a node's shape)
as a polynomial of degree at most one in each dim: ``batch``, ``2*batch``, ``batch*seq + 1``.
One more trace at fresh sizes checks each fit; a value the fit does not predict (``n // 2``,
``1 / n``) is an error that names the op and the line. Integer sizes (``x.shape[0] * 4``) and
products of dims, which is what shape code computes, fit exactly.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np


class ExportError(ValueError):
    """Export failed, an exported file is invalid, or inputs break the exported constraints."""


class Dim:
    """A named symbolic dimension with bounds, as in ``torch.export.Dim``.

    >>> batch = Dim("batch", min=1, max=4096)
    >>> batch
    Dim('batch', min=1, max=4096)

    Use the same ``Dim`` (or the same name) on two inputs to say their sizes are equal.
    """

    def __init__(self, name: str, *, min: int = 0, max: int = 2 ** 62):  # noqa: A002
        if not isinstance(name, str) or not name.isidentifier():
            raise ExportError(f"Dim name must be an identifier, got {name!r}")
        if not (isinstance(min, int) and isinstance(max, int)) or min < 0 or max < min:
            raise ExportError(f"Dim {name!r}: need integers 0 <= min <= max, got min={min!r}, max={max!r}")
        self.name, self.min, self.max = name, int(min), int(max)

    def __repr__(self):
        return f"Dim({self.name!r}, min={self.min}, max={self.max})"

    def __eq__(self, other):
        return isinstance(other, Dim) and (self.name, self.min, self.max) == (other.name, other.min, other.max)

    def __hash__(self):
        return hash((self.name, self.min, self.max))


def parse_dynamic_shapes(dynamic_shapes, arg_names, shapes):
    """``{input index: {dim: Dim}}`` from PyTorch's spelling: a dict keyed by argument name, or a
    tuple/list by position, each value ``{dim: Dim}`` (or a list/tuple over dims, None = static)."""
    if dynamic_shapes is None:
        return {}
    if isinstance(dynamic_shapes, dict):
        unknown = [k for k in dynamic_shapes if k not in arg_names]
        if unknown:
            raise ExportError(f"dynamic_shapes names {unknown[0]!r}, which is not an argument "
                              f"(arguments: {', '.join(arg_names)})")
        per_arg = [dynamic_shapes.get(n) for n in arg_names]
    elif isinstance(dynamic_shapes, (list, tuple)):
        if len(dynamic_shapes) != len(arg_names):
            raise ExportError(f"dynamic_shapes has {len(dynamic_shapes)} entries for "
                              f"{len(arg_names)} arguments")
        per_arg = list(dynamic_shapes)
    else:
        raise ExportError(f"dynamic_shapes must be a dict or a tuple, got {type(dynamic_shapes).__name__}")
    out = {}
    for i, spec in enumerate(per_arg):
        if spec is None:
            continue
        if isinstance(spec, (list, tuple)):
            spec = {d: v for d, v in enumerate(spec) if v is not None}
        if not isinstance(spec, dict):
            raise ExportError(f"dynamic_shapes[{arg_names[i]!r}] must map dims to Dim objects")
        ndim = len(shapes[i])
        for d, dim in spec.items():
            if dim is None:
                continue
            if not isinstance(dim, Dim):
                raise ExportError(f"dynamic_shapes[{arg_names[i]!r}][{d}] must be an "
                                  f"nb.export.Dim, got {dim!r}")
            if not isinstance(d, int) or not -ndim <= d < ndim:
                raise ExportError(f"dynamic_shapes[{arg_names[i]!r}]: dim {d!r} is out of range "
                                  f"for an input with {ndim} dims")
            out.setdefault(i, {})[d % ndim] = dim
    return out


def symbols_of(marks, shapes, arg_names):
    """``{name: Dim}`` and each symbol's example size; checks bounds and equal-name sizes."""
    dims, sizes = {}, {}
    for i, spec in marks.items():
        for d, dim in spec.items():
            size = shapes[i][d]
            where = f"{arg_names[i]}.shape[{d}]"
            old = dims.get(dim.name)
            if old is not None and old != dim:
                raise ExportError(f"two different Dims are named {dim.name!r}")
            if dim.name in sizes and sizes[dim.name] != size:
                raise ExportError(f"{where} = {size}, but Dim {dim.name!r} is {sizes[dim.name]} elsewhere")
            if not dim.min <= size <= dim.max:
                raise ExportError(f"{where} = {size} is outside Dim {dim.name!r}'s range "
                                  f"[{dim.min}, {dim.max}]")
            if size in (0, 1):
                raise ExportError(f"{where} = {size}: sizes 0 and 1 are specialised; give an example "
                                  f"input whose dim {d} has size >= 2 to make it dynamic")
            dims[dim.name], sizes[dim.name] = dim, size
    return dims, sizes


def probe_points(dims, sizes):
    """Sizes to trace at: the corners of a box around the example (each dim at two sizes; for
    more than three dims, one dim changed at a time), then a check point at fresh sizes."""
    names = sorted(dims)
    alt, third = {}, {}
    for n in names:
        d, v = dims[n], sizes[n]
        cands = [c for c in (v + 1, v - 1, v + 2, v - 2, v + 3, v - 3) if max(d.min, 2) <= c <= d.max]
        if len(cands) < 2:
            raise ExportError(f"Dim {n!r} ({d.min}..{d.max}) leaves no room to vary it around the "
                              f"example size {v}; make it static or widen its range")
        alt[n], third[n] = cands[0], next(c for c in cands[1:] if c != cands[0])
    base = {n: sizes[n] for n in names}
    if len(names) <= 3:
        fit = [dict(zip(names, combo)) for combo in itertools.product(*[(base[n], alt[n]) for n in names])]
    else:
        fit = [base] + [{**base, n: alt[n]} for n in names]
    return names, fit, third


class Poly:
    """An integer-valued polynomial over dim names: ``terms`` maps a sorted tuple of names (a
    monomial, () for the constant) to a Fraction coefficient."""

    __slots__ = ("terms",)

    def __init__(self, terms):
        self.terms = {k: Fraction(c) for k, c in terms.items() if c != 0}

    def __call__(self, env):
        total = Fraction(0)
        for mono, c in self.terms.items():
            p = c
            for n in mono:
                p *= env[n]
            total += p
        if total.denominator != 1:
            raise ExportError(f"the size {self} is not a whole number at "
                              + ", ".join(f"{n}={env[n]}" for n in self.names()))
        return int(total)

    def names(self):
        return sorted({n for mono in self.terms for n in mono})

    def __eq__(self, other):
        return isinstance(other, Poly) and self.terms == other.terms

    def __hash__(self):
        return hash(tuple(sorted(self.terms.items())))

    def __str__(self):
        parts = []
        for mono in sorted(self.terms, key=lambda m: (-len(m), m)):
            c = self.terms[mono]
            body = "*".join(mono)
            if not mono:
                parts.append(str(c))
            elif c == 1:
                parts.append(body)
            else:
                parts.append(f"{c}*{body}" if c.denominator == 1 else f"({c})*{body}")
        return " + ".join(parts).replace("+ -", "- ") if parts else "0"

    __repr__ = __str__

    def to_json(self):
        return [[c.numerator, c.denominator, list(mono)] for mono, c in sorted(self.terms.items())]

    @classmethod
    def from_json(cls, data, known):
        if not isinstance(data, list):
            raise ExportError("a symbolic size is malformed")
        terms = {}
        for t in data:
            if not (isinstance(t, list) and len(t) == 3 and type(t[0]) is int and type(t[1]) is int
                    and t[1] > 0 and isinstance(t[2], list) and all(isinstance(n, str) for n in t[2])):
                raise ExportError("a symbolic size term is malformed")
            unknown = [n for n in t[2] if n not in known]
            if unknown:
                raise ExportError(f"a symbolic size uses {unknown[0]!r}, which is not a declared Dim")
            terms[tuple(sorted(t[2]))] = Fraction(t[0], t[1])
        return cls(terms)


def fit(names, points, values):
    """The Poly (multilinear in ``names``) through ``values`` at ``points``, or None."""
    monos = [m for r in range(len(names) + 1) for m in itertools.combinations(names, r)]
    if len(points) < len(monos):           # one dim changed at a time: affine terms only
        monos = [m for m in monos if len(m) <= 1]
    rows = [[float(np.prod([p[n] for n in m])) if m else 1.0 for m in monos] for p in points]
    a, b = np.array(rows), np.array([float(v) for v in values])
    coef, *_ = np.linalg.lstsq(a, b, rcond=None)
    poly = Poly({m: Fraction(float(c)).limit_denominator(64) for m, c in zip(monos, coef)})
    try:
        if all(poly(p) == v for p, v in zip(points, values)):
            return poly
    except ExportError:
        pass
    return None

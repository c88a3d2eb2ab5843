"""einsum's subscript parsing, its gradient and its decomposition into primitives.

The ``einsum`` op (in linalg.py) only ever sees *canonical* subscripts: every ``...``
replaced by letters, the output given explicitly, and operands already broadcast so each
letter has one size. Parsing NumPy's full syntax happens once, in the front.

Design: eager einsum calls ``xp.einsum`` (BLAS-backed, fast); its gradient is again an
einsum (so it traces and differentiates twice); for the compiler, the decomposition
contracts operands pairwise with permute/reshape/matmul and takes diagonals with an
identity mask, so code generators only see primitives.
"""
from __future__ import annotations

import math
import string

from .. import ops

_LETTERS = string.ascii_letters


def split(subscripts: str):
    """'ab,bc->ac' -> (['ab', 'bc'], 'ac')."""
    lhs, out = subscripts.split("->")
    return lhs.split(","), out


def canonicalize(subscripts: str, shapes) -> tuple[str, dict]:
    """NumPy einsum subscripts (with ``...`` and implicit output) -> (canonical string,
    letter -> size). Raises ValueError like NumPy for malformed input."""
    if not isinstance(subscripts, str):
        raise TypeError("einsum: only the subscripts-string form is supported")
    s = subscripts.replace(" ", "")
    if s.count("->") > 1:
        raise ValueError(f"einsum: subscripts {subscripts!r} contain more than one '->'")
    lhs, out = s.split("->") if "->" in s else (s, None)
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: {len(terms)} operand subscripts in {subscripts!r} but "
                         f"{len(shapes)} operands")
    for t in terms + ([out] if out is not None else []):
        bad = set(t.replace("...", "")) - set(_LETTERS)
        if bad or t.count("...") > 1:
            raise ValueError(f"einsum: invalid subscript term {t!r} in {subscripts!r}")
    used = set(c for c in s if c in _LETTERS)
    spare = [c for c in _LETTERS if c not in used]
    ell_nd, nds = 0, []
    for i, (t, sh) in enumerate(zip(terms, shapes)):
        nlet = len(t.replace("...", ""))
        nd = len(sh) - nlet
        if ("..." not in t and nd != 0) or nd < 0:
            raise ValueError(f"einsum: operand {i} has {len(sh)} dimensions but subscripts "
                             f"{t!r} name {nlet}")
        nds.append(nd)
        ell_nd = max(ell_nd, nd)
    if ell_nd > len(spare):
        raise ValueError("einsum: too many dimensions for the available subscript letters")
    ell = "".join(spare[:ell_nd])
    terms = [t.replace("...", ell[ell_nd - nd:]) for t, nd in zip(terms, nds)]
    if out is None:
        counts = {}
        for t in terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        if "..." not in out and ell_nd:
            raise ValueError("einsum: output has more dimensions than subscripts given, but no "
                             "'...' ellipsis to broadcast the extra dimensions")
        out = out.replace("...", ell)
        for c in out:
            if out.count(c) > 1:
                raise ValueError(f"einsum: output subscript {c!r} appears more than once")
            if not any(c in t for t in terms):
                raise ValueError(f"einsum: output subscript {c!r} does not appear in the inputs")
    sizes: dict[str, int] = {}
    for i, (t, sh) in enumerate(zip(terms, shapes)):
        for c, n in zip(t, sh):
            m = sizes.get(c, 1)
            if n != 1 and m != 1 and n != m:
                raise ValueError(f"einsum: size of subscript {c!r} is {m} in one operand and {n} "
                                 f"in operand {i} (shapes {[tuple(x) for x in shapes]})")
            sizes[c] = max(m, n) if 0 not in (m, n) else 0
    return ",".join(terms) + "->" + out, sizes


def sizes_of(subscripts, shapes) -> dict:
    terms, _ = split(subscripts)
    return {c: n for t, sh in zip(terms, shapes) for c, n in zip(t, sh)}


def _fresh(used):
    return next(c for c in _LETTERS if c not in used)


def grad(g, out, *xs, subscripts):
    """d/dx_i of einsum: an einsum of g with the other operands, with identity factors for
    repeated letters and ones for letters summed only in x_i."""
    terms, o = split(subscripts)
    sizes = sizes_of(subscripts, [x.shape for x in xs])
    res = []
    for i, (x, t) in enumerate(zip(xs, terms)):
        if not getattr(x, "requires_grad", False):
            res.append(None)
            continue
        uniq = "".join(dict.fromkeys(t))
        others = [terms[j] for j in range(len(xs)) if j != i] + [o]
        operands = [xs[j] for j in range(len(xs)) if j != i] + [g]
        for c in uniq:          # a letter summed away only inside x_i: its gradient broadcasts
            if not any(c in u for u in others):
                others.append(c)
                operands.append(ops.ones(sizes[c], dtype=g.dtype, device=g.device))
        gi = ops.einsum(",".join(others) + "->" + uniq, *operands)
        if len(uniq) != len(t):  # repeated letters: put the gradient on the diagonal
            used = set(subscripts)
            target, eyes, eye_terms, seen = "", [], [], set()
            for c in t:
                if c in seen:
                    f = _fresh(used)
                    used.add(f)
                    target += f
                    eye_terms.append(c + f)
                    eyes.append(ops.eye(sizes[c], dtype=g.dtype, device=g.device))
                else:
                    seen.add(c)
                    target += c
            gi = ops.einsum(",".join([uniq] + eye_terms) + "->" + target, gi, *eyes)
        res.append(gi)
    return tuple(res)


def _diagonals(x, t):
    """Take the diagonal for every repeated letter in term t (mask with eye, then sum)."""
    while len(set(t)) != len(t):
        c = next(c for c in t if t.count(c) > 1)
        p = t.index(c)
        q = t.index(c, p + 1)
        n = x.shape[p]
        shape = [1] * x.ndim
        shape[p] = shape[q] = n
        mask = ops.eye(n, dtype=x.dtype, device=x.device).reshape(tuple(shape))
        y = (x * mask).sum(axis=q)
        x = y.astype(x.dtype) if y.dtype is not x.dtype else y
        t = t[:q] + t[q + 1:]
    return x, t


def _sum_unneeded(x, t, keep):
    axes = tuple(i for i, c in enumerate(t) if c not in keep)
    if not axes:
        return x, t
    y = x.sum(axis=axes)
    y = y.astype(x.dtype) if y.dtype is not x.dtype else y
    return y, "".join(c for c in t if c in keep)


def _contract(x, t, y, u, keep):
    """One pairwise contraction as a batched matmul."""
    batch = [c for c in t if c in u and c in keep]
    contr = [c for c in t if c in u and c not in keep]
    xo = [c for c in t if c not in u]
    yo = [c for c in u if c not in t]
    size = {c: n for c, n in zip(t + u, tuple(x.shape) + tuple(y.shape))}
    bshape = tuple(size[c] for c in batch)
    m = math.prod(size[c] for c in xo)
    k = math.prod(size[c] for c in contr)
    n = math.prod(size[c] for c in yo)
    xm = x.permute(tuple(t.index(c) for c in batch + xo + contr)).reshape(bshape + (m, k))
    ym = y.permute(tuple(u.index(c) for c in batch + contr + yo)).reshape(bshape + (k, n))
    z = xm @ ym
    return z.reshape(bshape + tuple(size[c] for c in xo + yo)), "".join(batch + xo + yo)


def decompose(*xs, subscripts):
    """einsum in terms of mul/sum/permute/reshape/matmul (what the compiler lowers)."""
    terms, out = split(subscripts)
    as_bool = all(x.dtype.kind == "b" for x in xs)
    if as_bool:  # matmul has no bool version: count in int64, then test != 0
        xs = [x.astype("int64") for x in xs]
    cur = [_diagonals(x, t) for x, t in zip(xs, terms)]
    x, t = cur[0]
    for i in range(1, len(cur) + 1):
        rest = set("".join(tt for _, tt in cur[i:]))
        keep = set(out) | rest
        x, t = _sum_unneeded(x, t, keep)
        if i < len(cur):
            y, u = cur[i]
            later = set("".join(tt for _, tt in cur[i + 1:]))
            y, u = _sum_unneeded(y, u, set(out) | later | set(t))
            x, t = _contract(x, t, y, u, set(out) | later)
    if t != out:
        x = x.permute(tuple(t.index(c) for c in out))
    if as_bool:
        x = x != 0
    return x


def out_shape(subscripts, shapes):
    sizes = sizes_of(subscripts, shapes)
    return tuple(sizes[c] for c in split(subscripts)[1])


"""PyTorch spellings over existing ops: ``masked_fill``, ``narrow``, ``t``, ``view_as``,
``type_as``, the ``new_*`` constructors, the in-place random fills (``normal_``, ``uniform_``,
...) and ``multinomial``. None of them adds an op: autograd, tracing and code generation
see only the ops they call (``where``, slicing, ``permute``, ``reshape``, ``astype``, ``full``).

>>> import nbaccel as nb
>>> x = nb.arange(6.0).reshape(2, 3)
>>> x.masked_fill(x > 3, -1.0).tolist()
[[0.0, 1.0, 2.0], [3.0, -1.0, -1.0]]
>>> x.narrow(1, 1, 2).t().shape
(2, 2)
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as D, ops, autograd
from .creation import _full_front, generator
from .fronts import as_tensor
from .meta import normalize_axis
from .registry import defalias, defmethod
from ..convert import tensor, asarray
from ..tensor_meta import is_tensor


# ---- masked_fill ------------------------------------------------------------------------------

def masked_fill(input, mask, value):
    """``input`` with ``value`` where ``mask`` is True (mask broadcasts to input's shape); the
    result keeps input's dtype, as PyTorch."""
    x, m = as_tensor(input), as_tensor(mask)
    if m.dtype.kind != "b":
        raise TypeError(f"masked_fill only supports boolean masks, but got mask with dtype {m.dtype}")
    if is_tensor(value) and value.ndim != 0:
        raise ValueError("masked_fill only supports a 0-dimensional value tensor, but got tensor "
                         f"with {value.ndim} dimension(s)")
    out = ops.where(m, value, x)
    if out.dtype is not x.dtype:
        out = out.astype(x.dtype)
    if tuple(out.shape) != tuple(x.shape):
        raise RuntimeError(f"masked_fill: mask of shape {tuple(m.shape)} does not broadcast to "
                           f"input of shape {tuple(x.shape)}")
    return out


def masked_fill_(self, mask, value):
    return self._assign(masked_fill(self, mask, value), "masked_fill_")


defalias("masked_fill", masked_fill, methods="masked_fill")
defmethod("masked_fill_", masked_fill_)


# ---- views: narrow, t, view_as, reshape_as, expand_as ------------------------------------------

def narrow(input, dim: int, start, length: int):
    """The view ``input[..., start:start + length, ...]`` along ``dim``."""
    x = as_tensor(input)
    (dim,) = normalize_axis(dim, x.ndim)
    if is_tensor(start):
        start = int(start.item())
    n = x.shape[dim]
    if not -n <= start <= n:
        raise IndexError(f"narrow: start ({start}) out of range for dimension of size {n}")
    start = start + n if start < 0 else start
    if length < 0 or start + length > n:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({n})")
    return x[(slice(None),) * dim + (slice(start, start + length),)]


def t(input):
    """Transpose a tensor of at most 2 dimensions (0-d and 1-d come back as they are)."""
    x = as_tensor(input)
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return x.swapaxes(0, 1) if x.ndim == 2 else x.reshape(tuple(x.shape))


def view_as(self, other):
    return self.view(*other.shape)


def reshape_as(self, other):
    return self.reshape(*other.shape)


def expand_as(self, other):
    return self.expand(*other.shape)


def type_as(self, other):
    """``self`` cast to ``other``'s dtype (no copy when it already has it)."""
    return self if self.dtype is other.dtype else self.astype(other.dtype)


defalias("narrow", narrow, methods="narrow")
defalias("t", t, methods="t")
for _name, _f in (("view_as", view_as), ("reshape_as", reshape_as), ("expand_as", expand_as),
                  ("type_as", type_as)):
    defmethod(_name, _f)


# ---- new_* constructors ------------------------------------------------------------------------

def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(int(s) for s in size)


def _new(value):
    def method(self, *size, dtype=None, device=None, requires_grad=False):
        return _full_front(_size(size), value, dtype=dtype or self.dtype,
                           device=device or self.device, requires_grad=requires_grad)
    return method


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return _full_front(tuple(size), fill_value, dtype=dtype or self.dtype,
                       device=device or self.device, requires_grad=requires_grad)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    if is_tensor(data):
        data = data.detach().clone()
        data = data.astype(dtype) if dtype is not None else data
        data = data.to(device or self.device)
        return data.requires_grad_(True) if requires_grad else data
    return tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                  requires_grad=requires_grad)


for _name, _f in (("new_zeros", _new(0)), ("new_ones", _new(1)), ("new_empty", _new(0)),
                  ("new_full", new_full), ("new_tensor", new_tensor)):
    defmethod(_name, _f)


# ---- in-place random fills ---------------------------------------------------------------------

def _fill_random(self, sample, what):
    """Write ``sample(shape)`` (a NumPy array from nbaccel's seeded generator) into self."""
    if self.dtype.kind not in "fc" and what in ("normal_", "uniform_", "exponential_"):
        raise TypeError(f"{what} expects a floating point tensor, got {self.dtype}")
    values = asarray(sample(tuple(self.shape)), dtype=self.dtype, device=self.device, _np=False)
    with autograd.no_grad():
        return self._assign(values, what)


def _rng(gen):
    return gen if gen is not None else generator()


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    return _fill_random(self, lambda s: _rng(generator).normal(mean, std, s), "normal_")


def uniform_(self, from_=0.0, to=1.0, *, generator=None):
    return _fill_random(self, lambda s: _rng(generator).uniform(from_, to, s), "uniform_")


def exponential_(self, lambd=1.0, *, generator=None):
    return _fill_random(self, lambda s: _rng(generator).exponential(1.0 / lambd, s), "exponential_")


def bernoulli_(self, p=0.5, *, generator=None):
    p = p.numpy() if is_tensor(p) else p
    return _fill_random(self, lambda s: _rng(generator).random(s) < p, "bernoulli_")


def random_(self, from_=0, to=None, *, generator=None):
    if to is None:
        from_, to = 0, (2 ** 24 if self.dtype.kind == "f" else int(np.iinfo(self.dtype.np).max))
    return _fill_random(self, lambda s: _rng(generator).integers(from_, to, s), "random_")


for _name, _f in (("normal_", normal_), ("uniform_", uniform_), ("exponential_", exponential_),
                  ("bernoulli_", bernoulli_), ("random_", random_)):
    defmethod(_name, _f)


def bernoulli(input, p=None, *, generator=None):
    """1 with probability ``input`` (or ``p``), else 0, in input's dtype."""
    x = as_tensor(input)
    probs = x.detach().numpy(force=True) if p is None else p
    return _fill_random(ops.zeros_like(x), lambda s: _rng(generator).random(s) < probs,
                        "bernoulli")


defalias("bernoulli", bernoulli, methods="bernoulli")


# ---- multinomial -------------------------------------------------------------------------------

def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None):
    """Draw ``num_samples`` category indices per row of non-negative weights ``input`` (1-d or
    2-d; rows need not sum to 1). Without replacement every row needs at least
    ``num_samples`` non-zero weights. Returns int64. Draws come from nbaccel's seeded generator
    (the same seed gives the same samples; they are not PyTorch's samples)."""
    x = as_tensor(input)
    if x.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got {x.ndim}")
    if x.dtype.kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got {x.dtype}")
    w = np.asarray(x.detach().numpy(force=True), dtype=np.float64)
    rows = w.reshape(-1, w.shape[-1])
    n = rows.shape[1]
    if num_samples <= 0:
        raise RuntimeError("multinomial: cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > n:
        raise RuntimeError("multinomial: cannot sample n_sample > prob_dist.size(-1) samples "
                           "without replacement")
    if (rows < 0).any() or not np.isfinite(rows).all():
        raise RuntimeError("multinomial: probability tensor contains either `inf`, `nan` or "
                           "element < 0")
    rng = _rng(generator)
    out = np.empty((rows.shape[0], num_samples), dtype=np.int64)
    for i, r in enumerate(rows):
        total = r.sum()
        if total <= 0:
            raise RuntimeError("multinomial: invalid multinomial distribution (sum of "
                               "probabilities <= 0)")
        if not replacement and np.count_nonzero(r) < num_samples:
            raise RuntimeError("multinomial: invalid multinomial distribution (with replacement"
                               "=False, not enough non-negative category to sample)")
        out[i] = rng.choice(n, size=num_samples, replace=replacement, p=r / total)
    return asarray(out.reshape(w.shape[:-1] + (num_samples,)), dtype=D.int64, device=x.device,
                   _np=False)


defalias("multinomial", multinomial, methods="multinomial")


from . import losses_binary  # noqa: E402,F401  (binary_cross_entropy and its logits form)

from . import rnn_scan  # noqa: E402,F401  (the LSTM time loop as one op)

"""``np.ravel(a, order=...)``, ``a.ravel(order)``, ``a.flatten(order)`` and ``reshape(...,
order=...)`` in compiled code read the elements in NumPy's order and give a view exactly where
NumPy does (issue 37). Before, the
op ignored ``order`` (``np.ravel(a, order="F")`` gave C order), and the methods ran NumPy on a
C-ordered copy of the value (``a.T.ravel(order="K")`` read the transpose in C order): silent
wrong values. "F" reverses the axes, "A" is "F" for an F- and not C-contiguous array, "K"
reads the axes by decreasing stride (as NumPy, without flipping a negative one), each from the
trace's model of NumPy's strides (docs/views.md)."""
import itertools

import numpy as np
import pytest

import nbaccel as nb


def _layouts():
    a = np.arange(24.0).reshape(2, 3, 4)
    return {"C": a, "T": a.T, "F": np.asfortranarray(a), "perm": a.transpose(1, 0, 2),
            "flip": a[:, ::-1], "step": a[:, :, ::2], "Tflip": a.T[::-1], "2dT": a[0].T}


SPELLINGS = {
    "np.ravel": lambda x, o: np.ravel(x, order=o),
    "method": lambda x, o: x.ravel(order=o),
    "method, positional": lambda x, o: x.ravel(o),
    "flatten": lambda x, o: x.flatten(order=o),
    "of a computed transpose": lambda x, o: (x * 1).T.ravel(order=o),
}


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_ravel_reads_numpys_order_and_views_where_numpy_does(mode, spelling):
    e = SPELLINGS[spelling]
    for layout, order in itertools.product(_layouts(), "CFAK"):
        def fn(x, o=order):
            r = e(x, o)
            r[1] = 99.0        # a write through a view reaches x, as NumPy's does
            return r, x * 1
        cf = nb.compile(fn, mode=mode, backend="numpy")
        for call in range(2):       # the trace, then the cached entry or the replay
            want = fn(_layouts()[layout])
            got = cf(_layouts()[layout])
            for g, w in zip(got, want):
                assert g.shape == w.shape and np.array_equal(g, w), (layout, order, call)


RESHAPES = {
    "np.reshape": lambda x, o, s: np.reshape(x, s, order=o),
    "method, tuple": lambda x, o, s: x.reshape(s, order=o),
    "method, ints": lambda x, o, s: x.reshape(*s, order=o),
    "of a computed value": lambda x, o, s: np.exp(x).reshape(s, order=o),
}


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
@pytest.mark.parametrize("spelling", sorted(RESHAPES))
def test_reshape_in_f_order_is_numpys_view_or_copy(mode, spelling):
    """reshape(shape, order="F"/"A"): np.reshape raised TypeError ("unexpected keyword argument
    'order'"), and the method reshaped a C-ordered copy, so a write through NumPy's view of an
    F-ordered array never reached it. Now the axes reversed, reshaped, reversed back."""
    e = RESHAPES[spelling]
    layouts = {k: v for k, v in _layouts().items() if k in ("C", "T", "F", "perm", "flip")}
    for layout, order, shape in itertools.product(layouts, ["F", "A", None], [(4, -1), (6, 2, 2)]):
        def fn(x, o=order, s=shape):
            r = e(x, o, s)
            r[(1,) * r.ndim] = 99.0     # through a view, into x
            return r, x * 1
        cf = nb.compile(fn, mode=mode, backend="numpy")
        for call in range(2):
            want = fn(_layouts()[layout])
            got = cf(_layouts()[layout])
            for g, w in zip(got, want):
                assert g.shape == w.shape and np.allclose(g, w, rtol=1e-12), (layout, order, shape, call)


def test_reshape_in_k_order_is_numpys_error():
    with pytest.raises(ValueError, match="order 'K' is not permitted for reshaping"):
        nb.compile(lambda x: np.reshape(x * 1, (3, 2), order="K"))(np.ones(6))


def test_a_bad_order_is_numpys_error():
    with pytest.raises(ValueError, match="order must be one of"):
        nb.compile(lambda x: np.ravel(x * 1, order="Q"))(np.ones((2, 2)))

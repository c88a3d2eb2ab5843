"""The eager op path of issue 36: ``dispatch.apply`` runs the common call (one or two plain
tensors, no trace) inline, and the fronts skip conversions of what is already a Tensor. Each
test holds the short path to what the general path (``dispatch._general``, which decides every
uncommon call) gives for the same call: the values, dtype, shape, flavour, view versions,
autograd record and the exceptions."""
import numpy as np
import pytest

import nbaccel as nb
from nbaccel import dispatch
from nbaccel.ops.registry import OPS


def _pair(dtype="float32", grad=False, npflag=False):
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((4, 5)).astype(dtype) for _ in range(2))
    x, y = nb.tensor(a, requires_grad=grad), nb.tensor(b, requires_grad=grad)
    x._np = y._np = npflag    # (nb.tensor of an ndarray is NumPy-flavoured; set it either way)
    return x, y


def _same(got, want):
    assert type(got) is type(want)
    assert got.dtype is want.dtype and got.shape == want.shape and got._np == want._np
    assert got.requires_grad == want.requires_grad
    assert (got.grad_fn is None) == (want.grad_fn is None)
    np.testing.assert_array_equal(got._data, want._data)


CALLS = [   # (op name, args of the two inputs, params)
    ("add", lambda x, y: (x, y), {}),
    ("multiply", lambda x, y: (x, y), {}),
    ("matmul", lambda x, y: (x, y.T.contiguous()), {}),
    ("exp", lambda x, y: (x,), {}),
    ("sum", lambda x, y: (x,), {"axis": None, "keepdims": False}),
    ("sum", lambda x, y: (x,), {"axis": (1,), "keepdims": True}),
]


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("npflag", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("name,make,params", CALLS)
def test_short_path_gives_what_the_general_path_gives(name, make, params, dtype, npflag, grad):
    if grad and dtype == "int32":
        pytest.skip("integer tensors do not require grad")
    x, y = _pair(dtype, grad, npflag)
    args = make(x, y)
    got = dispatch.apply(OPS[name], args, dict(params))
    want = dispatch._general(OPS[name], args, dict(params))
    _same(got, want)
    if grad:
        got.sum().backward(retain_graph=True)    # (matmul's second input is y.T's result)
        gx = x.grad.numpy().copy()
        x.grad = y.grad = None
        want.sum().backward()
        np.testing.assert_array_equal(gx, x.grad.numpy())


def test_a_numpy_flavoured_result_is_flagged_true_not_the_inputs_value():
    x, y = _pair()
    x._np = 2            # tensor.NP_ARRAY_0D: a 0-d NumPy array's flag; results carry True
    assert (x + y)._np is True and x.exp()._np is True
    assert (y + y)._np is False


def test_a_view_shares_its_bases_version_and_a_copy_does_not():
    x, _ = _pair()
    v = x.view(20)
    c = x + 1
    x.add_(1)
    assert v._version is x._version and v._version[0] == 1
    assert c._version[0] == 0


def test_a_recorded_input_written_in_place_still_raises_at_backward():
    x, _ = _pair(grad=True)
    h = x * 1          # a non-leaf, so it may be written in place
    y = h.exp()        # exp's rule reads its output; mul's reads the inputs
    z = (h * h).sum()
    h.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()
    y.sum().backward()  # exp's record does not need h's value


def test_grad_mode_off_records_nothing_on_the_short_path():
    x, y = _pair(grad=True)
    with nb.no_grad():
        z = x + y
    assert z.grad_fn is None and not z.requires_grad
    z = x + y
    assert z.grad_fn is not None and z.requires_grad
    assert z.grad_fn.name == "add" and len(z.grad_fn.next_functions) == 2


@pytest.mark.parametrize("make", [lambda x, y: x + y, lambda x, y: x.exp(),
                                  lambda x, y: x.sum(axis=(1,))])
def test_the_inline_record_sets_every_field_a_node_has(make):
    # apply builds the short path's Node field by field: one it missed would raise here
    from nbaccel.autograd import Node
    x, y = _pair(grad=True)
    fast = make(x, y).grad_fn
    general = dispatch._general(fast.op, fast._args, dict(fast.params)).grad_fn
    for name in Node.__slots__:
        if name != "__weakref__":
            assert type(getattr(fast, name)) is type(getattr(general, name)), name
    assert repr(fast) == repr(general)


def test_a_parameter_operand_gives_the_same_result_and_grads():
    # a Tensor subclass (nn.Parameter) leaves the inline path: same record, same gradients
    x, y = _pair(grad=True)
    w = nb.nn.Parameter(y.detach().clone())
    (x * w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), x.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())


def test_errors_are_the_general_paths():
    x = nb.ones(3, 4)
    with pytest.raises(Exception) as short:
        x + nb.ones(5)
    with pytest.raises(Exception) as general:
        dispatch._general(OPS["add"], (x, nb.ones(5)), {})
    assert type(short.value) is type(general.value) and str(short.value) == str(general.value)
    u = nb.tensor([1], dtype=nb.uint8)
    with pytest.raises(OverflowError, match="300 out of bounds for uint8"):
        u + 300
    with pytest.raises(NotImplementedError, match="complex"):
        nb.ones(2, requires_grad=True) * nb.tensor([1j, 2j])


def test_an_unhashable_param_is_worked_out_each_call():
    x, _ = _pair()
    # a list cannot key the memo; the rule runs each call, and the memo is left as it was
    before = len(dispatch._INFER)
    got = dispatch.apply(OPS["reshape"], (x,), {"shape": [5, 4]})
    assert got.shape == (5, 4) and len(dispatch._INFER) == before


# ---- the fronts' short cuts: each against a spelling that takes the full argument parsing ----

def _same_call(fast, full):
    """``fast()`` and ``full()`` give the same tensor, or raise the same exception."""
    try:
        want = full()
    except Exception as e:          # noqa: BLE001 - the exception itself is compared
        with pytest.raises(type(e)) as got:
            fast()
        assert str(got.value) == str(e)
        return
    _same(fast(), want)


I64 = np.int64       # an index or axis that is not a Python int takes the fronts' full parsing


@pytest.mark.parametrize("i", [0, 2, -1, -4, 3, 4, -5])
def test_an_int_index_is_what_encode_index_makes_of_it(i):
    x, _ = _pair(grad=True)
    _same_call(lambda: x[i], lambda: x[I64(i)])
    if -4 <= i < 4:
        assert x[i]._version is x._version      # a view of x


@pytest.mark.parametrize("n", [20, -1, 7])
def test_view_of_one_int_is_the_shape_tuple(n):
    x, _ = _pair(grad=True)
    _same_call(lambda: x.view(n), lambda: x.view((I64(n),)))
    _same_call(lambda: x.reshape(n), lambda: x.reshape([n]))


@pytest.mark.parametrize("a,b", [(0, 1), (1, 0), (-1, 0), (-2, -1), (0, 2), (-3, 0), (1, 1)])
def test_transpose_of_two_ints_swaps_as_axis_index_does(a, b):
    x, _ = _pair(grad=True)
    _same_call(lambda: x.transpose(a, b), lambda: nb.swapaxes(x, I64(a), I64(b)))
    _same_call(lambda: nb.swapaxes(x, a, b), lambda: nb.swapaxes(x, I64(a), I64(b)))


def test_transpose_remembers_its_permutation_per_ndim():
    x2, x3 = nb.ones(2, 3), nb.ones(2, 3, 4)
    for _ in range(2):                       # a miss, then the remembered permutation
        assert x2.transpose(0, 1).shape == (3, 2) and x2.transpose(-1, 0).shape == (3, 2)
        assert x3.transpose(0, 1).shape == (3, 2, 4) and x3.transpose(-1, 0).shape == (4, 3, 2)
        with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds"):
            x2.transpose(0, 2)
        assert x3.transpose(0, 2).shape == (4, 3, 2)


def test_transpose_out_of_range_names_the_axis():
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds for a tensor of "
                                                      "dimension 2"):
        nb.ones(2, 3).transpose(0, 2)


@pytest.mark.parametrize("dim", [-1, 0, 1, -2, 2, -3])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_softmax_of_an_int_dim_is_what_softmax_axis_gives(dim, dtype):
    x, _ = _pair(dtype)
    _same_call(lambda: x.softmax(dim), lambda: x.softmax(I64(dim)))
    _same_call(lambda: x.log_softmax(dim), lambda: x.log_softmax(I64(dim)))


def test_softmax_values_and_grad_match_the_decomposition():
    x, _ = _pair("float64", grad=True)
    y = x.softmax(-1)
    want = OPS["softmax"].decomp(x.detach(), axis=1)
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-12)
    (y * y).sum().backward()
    assert x.grad.shape == x.shape


@pytest.mark.parametrize("kw", [{}, {"keepdim": True}, {"keepdims": True}, {"keepdim": False}])
@pytest.mark.parametrize("dtype", ["float32", "int8", "bool", "uint16"])
def test_a_sum_over_all_axes_is_what_reduce_params_gives(kw, dtype):
    x = nb.tensor(np.arange(20).reshape(4, 5).astype(dtype))
    _same_call(lambda: x.sum(**kw), lambda: x.sum(axis=(0, 1), **kw))
    # the ufunc's reduction gives ndarray.sum's dtype and value
    np.testing.assert_array_equal(x.sum(**kw).numpy(),
                                  x.numpy().sum(keepdims=bool(kw and list(kw.values())[0])))


def test_matmul_of_plain_tensors_and_of_a_parameter_agree():
    x, y = _pair("float64")
    w = nb.nn.Parameter(y.T.contiguous())
    _same(x @ y.T.contiguous(), x @ w.detach())
    np.testing.assert_array_equal((x @ w).detach().numpy(), (x @ y.T.contiguous()).numpy())


def test_the_op_modules_call_dispatch_apply_directly():
    import sys
    from nbaccel.ops import fronts
    assert fronts.apply is dispatch.apply
    assert sys.modules["nbaccel.ops.elementwise"].apply is dispatch.apply
    assert nb.Tensor.__getitem__ is OPS["getitem"].front     # listed in getitem's methods


def test_an_index_key_is_remembered_and_tensor_indices_are_not():
    x, _ = _pair()
    for _ in range(2):                       # a miss, then the memo's hit
        np.testing.assert_array_equal(x[1:3, None]._data, x._data[1:3, None])
    i = nb.tensor([3, 0])
    np.testing.assert_array_equal(x[i]._data, x._data[[3, 0]])
    np.testing.assert_array_equal(x[i, 1:]._data, x._data[[3, 0], 1:])


def test_numpys_method_meanings_are_on_the_class_only_while_numpy_code_runs():
    # outside NumPy code x.view / x.sum are Tensor's own (no wrapper call per op); inside,
    # a NumPy-flavoured tensor gets NumPy's meaning, nested blocks included
    from nbaccel.ndarray_methods import numpy_code

    def either(name):
        return getattr(nb.Tensor.__dict__[name], "__nbaccel_either__", False)

    t = nb.tensor(np.arange(6.0))             # NumPy-flavoured (made from an ndarray)
    assert not either("view") and not either("sum") and not either("sort")
    assert t.view(3, 2).shape == (3, 2)
    vals, idx = t.sort()                      # PyTorch's: values and indices
    with numpy_code():
        assert either("view") and either("sum")
        with numpy_code():
            assert t.view().shape == (6,)     # NumPy's: the same data, the same shape
        assert either("view")                 # the inner block's exit keeps them
        assert t.copy().sort() is None        # NumPy's: in place, returns None
        assert nb.ones(3).sort()[0].shape == (3,)   # PyTorch's own tensor keeps PyTorch's
    assert not either("view") and not either("sort")
    with pytest.raises(AttributeError, match="no attribute 'fill'"):
        t.fill(0)                             # Tensor has none: its wrapper stays, and says so


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "uint8", "int64"])
def test_relu_with_its_dtypes_zero_gives_numpys_bits(dtype):
    # relu's impl passes a zero of the input's dtype, where np.maximum(x, 0) converts the int
    a = np.array([-0.0, 1.5, -2, 3, 0] if dtype[0] == "f" else [-1, 2, 0, 5, 1]).astype(dtype)
    if dtype[0] == "f":
        a = np.concatenate([a, np.array([np.nan, -np.inf, np.inf], dtype)])
    got = nb.tensor(a).relu().numpy()
    want = np.maximum(a, 0)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def test_grad_mode_off_in_another_thread_leaves_this_one_recording():
    # apply reads the thread-local grad mode only while some thread has it off (GRAD_OFF)
    import threading
    from nbaccel import autograd
    x, y = _pair(grad=True)
    inside, leave = threading.Event(), threading.Event()

    def other():
        with nb.no_grad():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    assert autograd.GRAD_OFF >= 1
    assert (x + y).grad_fn is not None and x.exp().grad_fn is not None   # on in this thread
    with nb.no_grad():
        assert (x + y).grad_fn is None and x.exp().grad_fn is None
        with nb.enable_grad():
            assert (x * y).grad_fn is not None
        assert (x * y).grad_fn is None
    leave.set()
    t.join()
    assert (x + y).grad_fn is not None


def test_the_trace_count_follows_set_active_trace():
    # apply reads the thread-local trace only while some thread traces (_TRACING)
    base = dispatch._TRACING
    g1, g2 = object(), object()
    prev = dispatch.set_active_trace(g1)
    try:
        assert dispatch._TRACING == base + 1
        dispatch.set_active_trace(g2)                 # another graph: still one thread
        assert dispatch._TRACING == base + 1 and dispatch.active_trace() is g2
    finally:
        dispatch.set_active_trace(prev)
    assert dispatch._TRACING == base
    x, y = _pair()
    f = nb.compile(lambda a, b: (a * b).exp())
    np.testing.assert_allclose(f(x, y).numpy(), (x * y).exp().numpy(), rtol=1e-6)
    assert dispatch._TRACING == base


def test_a_binary_dunder_passes_extra_arguments_on_to_the_front():
    # an operator's call is a plain call of the front; explicit extra arguments still reach it
    x, y = _pair("float64")
    np.testing.assert_array_equal(x.__add__(y, alpha=2).numpy(), (x + 2 * y).numpy())
    np.testing.assert_array_equal(x.__sub__(y, alpha=3).numpy(), (x - 3 * y).numpy())
    assert x.__add__(np.ma.masked_array([1.0])) is NotImplemented   # a masked array's own


def test_an_impl_gets_its_params_as_keywords_on_a_miss_and_a_hit():
    # the memo entry of a call with params carries a caller that spells the keywords out; names
    # that cannot be spelled (a Python keyword) take the ** call
    from nbaccel.ops.registry import defop, remove_op
    seen = []

    def impl(xp, x, **kw):
        seen.append(kw)
        return x * 2

    op = defop("toy_scaled_copy", kind="unary", impl=impl, differentiable=False, infer_memo=True,
               infer=lambda args, p: (args[0].shape, args[0].dtype))
    try:
        x, _ = _pair()
        for params in ({"scale": 2.0, "shift": None}, {"scale": 2.0, "shift": None},
                       {"lambda": 1}, {"lambda": 1}, {"shift": [1]}):   # (a list: no memo)
            got = dispatch.apply(op, (x,), dict(params))
            assert seen[-1] == params
            np.testing.assert_array_equal(got.numpy(), x.numpy() * 2)
    finally:
        remove_op("toy_scaled_copy")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_gives_the_bits_of_its_numpy_expression(dtype, axis):
    # the impl calls the ufuncs and their reductions directly: the same operations as the
    # plain NumPy expression, so the same bits
    a = np.random.default_rng(3).standard_normal((5, 7)).astype(dtype) * 10
    a[1, 2] = np.inf if axis == 1 else a[1, 2]
    with np.errstate(invalid="ignore"):      # (the row with inf: inf - inf, NaNs on both sides)
        e = np.exp(a - a.max(axis=axis, keepdims=True))
        want = e / e.sum(axis=axis, keepdims=True)
        got = nb.tensor(a).softmax(axis).numpy()
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def test_grad_rules_that_read_the_output_take_the_short_path(monkeypatch):
    # tanh's and relu's rules read their output as an autograd shell; while it is at its saved
    # version the short path reads its array (it went to the general path, about twice the
    # cost, on every such node of a backward)
    x, y = _pair(grad=True)
    z = x
    for _ in range(3):
        z = (z * 0.9 + y).relu().tanh()
    loss = z.sum()
    calls = []
    general = dispatch._general
    monkeypatch.setattr(dispatch, "_general", lambda op, a, p: calls.append(op.name) or
                        general(op, a, p))
    loss.backward()
    assert calls == []
    xa, ya = x._data.astype(np.float64), y._data.astype(np.float64)
    want, h = np.ones_like(xa), xa
    outs = []
    for _ in range(3):
        pre = h * 0.9 + ya
        outs.append((pre, np.tanh(np.maximum(pre, 0))))
        h = outs[-1][1]
    gy = np.zeros_like(ya)
    for pre, out in reversed(outs):
        want = want * (1 - out * out) * (pre > 0)
        gy += want
        want = want * 0.9
    np.testing.assert_allclose(x.grad._data, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y.grad._data, gy, rtol=1e-5, atol=1e-6)


def test_an_output_written_in_place_still_raises_at_backward():
    x, _ = _pair(grad=True)
    y = (x * 1).tanh()      # tanh's rule reads its output
    z = y.sum()
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_a_python_scalar_factor_gets_no_gradient_product(monkeypatch):
    x, y = _pair(grad=True)
    loss = (x * 0.5).sum() + (y * x).sum()
    names = []
    mul = OPS["multiply"]
    impl = mul.impl
    monkeypatch.setattr(mul, "impl", lambda xp, *a: names.append(len(a)) or impl(xp, *a))
    loss.backward()
    assert len(names) == 3       # g * 0.5 for x; g * x and g * y for y * x (no g * x for 0.5)
    np.testing.assert_allclose(x.grad._data, 0.5 + y._data)
    np.testing.assert_allclose(y.grad._data, x._data)


def test_the_backward_sums_a_fan_in_into_its_own_gradient(monkeypatch):
    # the three pieces of a split send three full-size gradients to one node: the walk adds
    # them into the first (held by nothing else) instead of making a new array per sum
    from nbaccel import autograd
    x = nb.tensor(np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32),
                  requires_grad=True)
    in_place = []
    summed = autograd._summed

    def spy(p, ga, create_graph, held):
        out = summed(p, ga, create_graph, held + 1)    # (this frame holds p once more)
        in_place.append(out is p)
        return out
    monkeypatch.setattr(autograd, "_summed", spy)
    q, k, v = (x * 1).split(2, dim=1)
    (q * 1 + k * 2 + v * 3).sum().backward()
    assert in_place == [True, True]
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat([[1, 2, 3]], 4, 0).repeat(2, 1))


def test_a_gradient_shared_by_two_nodes_is_never_written_into():
    # add's rule gives the same tensor to both inputs: summing into it for one input would
    # change the other's
    x = nb.tensor(np.ones((3, 2), np.float32), requires_grad=True)
    a, b = x * 2, x * 3
    ((a + b) + a).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 2), 7, np.float32))
    y = nb.tensor(np.ones(3, np.float32), requires_grad=True)
    g = nb.tensor(np.ones(3, np.float32))
    h = y * 1
    (h + h).backward(g)      # the output's gradient is the caller's g, summed twice
    np.testing.assert_array_equal(g.numpy(), np.ones(3, np.float32))
    np.testing.assert_array_equal(y.grad.numpy(), np.full(3, 2, np.float32))

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

"""The Array API 2023.12 signatures and result dtypes that nbaccel's namespace once got wrong
(issue 21 item 8), checked against array-api-strict, the standard's reference namespace."""
import numpy as np
import pytest

import nbaccel as nb

xp = pytest.importorskip("array_api_strict")


def _same(ours, theirs):
    assert str(ours.dtype) == str(theirs.dtype).split(".")[-1]
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


CASES = {
    # name: a call that takes either namespace (float64 given explicitly: nbaccel's default
    # float is float32, as PyTorch's; the standard leaves the default to the library)
    "vecdot int32": lambda ns: ns.vecdot(ns.asarray([[1, 2], [3, 4]], dtype=ns.int32),
                                         ns.asarray([1, 1], dtype=ns.int32)),
    "vecdot int8": lambda ns: ns.vecdot(ns.asarray([[1, 2]], dtype=ns.int8),
                                        ns.asarray([[3, 4]], dtype=ns.int8), axis=-1),
    "vecdot uint16": lambda ns: ns.vecdot(ns.asarray([1, 2], dtype=ns.uint16),
                                          ns.asarray([5, 4], dtype=ns.uint16)),
    "sum dtype int32": lambda ns: ns.sum(ns.asarray([[1, 2], [3, 4]], dtype=ns.int32),
                                         axis=1, dtype=ns.int32),
    "sum dtype int8 of int64": lambda ns: ns.sum(ns.asarray([1, 2], dtype=ns.int64), dtype=ns.int8),
    "prod dtype uint8": lambda ns: ns.prod(ns.asarray([2, 3], dtype=ns.uint8), dtype=ns.uint8),
    "sum int8": lambda ns: ns.sum(ns.asarray([1, 2], dtype=ns.int8)),
    "cumulative_sum include_initial": lambda ns: ns.cumulative_sum(
        ns.asarray([[1, 2], [3, 4]], dtype=ns.int32), axis=1, include_initial=True),
    "cumulative_sum 1-d include_initial": lambda ns: ns.cumulative_sum(
        ns.asarray([1., 2.], dtype=ns.float64), include_initial=True),
    "cumulative_sum dtype": lambda ns: ns.cumulative_sum(
        ns.asarray([1, 2], dtype=ns.int16), dtype=ns.int16),
    "reshape shape= copy=": lambda ns: ns.reshape(ns.ones((2, 3), dtype=ns.float64),
                                                   shape=(3, 2), copy=True),
    "reshape copy=None": lambda ns: ns.reshape(ns.ones((2, 3), dtype=ns.float64), (6,), copy=None),
    "permute_dims axes=": lambda ns: ns.permute_dims(
        ns.reshape(ns.arange(6, dtype=ns.float64), (2, 3)), axes=(1, 0)),
    "broadcast_to shape=": lambda ns: ns.broadcast_to(ns.asarray([1., 2.], dtype=ns.float64),
                                                       shape=(3, 2)),
    "astype device=": lambda ns: ns.astype(ns.asarray([1.5, 2.5], dtype=ns.float64), ns.int32,
                                           device=ns.asarray(0.).device),
    "astype copy=False": lambda ns: ns.astype(ns.asarray([1, 2], dtype=ns.int32), ns.int32,
                                              copy=False),
    "from_dlpack copy= device=": lambda ns: ns.from_dlpack(np.arange(3.), copy=True,
                                                           device=ns.asarray(0.).device),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_array_api_strict(name):
    _same(CASES[name](nb), CASES[name](xp))


def test_reshape_copy_true_does_not_alias():
    x = nb.zeros((2, 2))
    y = nb.reshape(x, (4,), copy=True)
    y[0] = 5.0
    assert float(x[0, 0]) == 0.0


def test_from_dlpack_copy_true_does_not_alias():
    a = np.zeros(3)
    t = nb.from_dlpack(a, copy=True)
    a[0] = 7.0
    assert float(t[0]) == 0.0
    assert float(nb.from_dlpack(a)[0]) == 7.0   # the default is zero-copy


@pytest.mark.parametrize("call", [
    lambda: nb.reshape(nb.ones(4), (2, 2), ordr="C"),
    lambda: nb.permute_dims(nb.ones((2, 2)), perm=(1, 0)),
    lambda: nb.broadcast_to(nb.ones(2), shap=(2, 2)),
])
def test_unknown_keywords_still_raise(call):
    with pytest.raises(TypeError):
        call()


def test_pytorch_spellings_keep_working():
    b = nb.ones((2, 3))
    assert b.permute(1, 0).shape == (3, 2)
    assert b.permute(dims=(1, 0)).shape == (3, 2)
    assert nb.ones((1, 3)).expand(size=(4, 3)).shape == (4, 3)
    assert nb.ones((1, 3)).expand(4, -1).shape == (4, 3)
    assert b.reshape(3, 2).shape == (3, 2)

"""ndarray methods in a %%compile cell (issue 21): in-place methods write through (or the cell
runs plainly, saying why), NumPy's meaning of ``sort`` / ``repeat`` / ``view`` / ``item`` /
``nonzero``, ``.flat``, ``.strides``, ``__setitem__`` with every index kind. Each cell runs
plainly and compiled; names, values, dtypes, types, stdout and exceptions must match."""
import pathlib
import sys

import numpy as np
import pytest

pytest.importorskip("IPython")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from tests.cells import catalogue, harness  # noqa: E402

import nbaccel as nb  # noqa: E402

# what a user sees, the plain re-run included (tests/conftest.py: not_strict)
pytestmark = pytest.mark.usefixtures("not_strict")

SETUP = "import numpy as np\nZ = np.array([3., 1., 2., 5., 4.])\nM = np.arange(6.).reshape(2, 3)\n"
CASES = {
 "sort": "Z.sort()\nr = Z * 1\n",
 "sort_ret": "v = Z.sort()\n",
 "sort_axis": "M.sort(axis=0)\nr = M + 0\n",
 "fill": "Z.fill(7)\nr = Z + 0\n",
 "partition": "Z.partition(2)\nr = Z + 0\n",
 "put": "Z.put([0, 2], [9., 8.])\nr = Z + 0\n",
 "resize": "Z.resize((2, 2), refcheck=False)\nr = Z + 0\n",
 "byteswap_inplace": "Z.byteswap(inplace=True)\nr = Z + 0\n",
 "byteswap": "r = Z.byteswap()\n",
 "setflags": "Z.setflags(write=False)\ntry:\n    Z[0] = 1\nexcept ValueError as e:\n    msg = str(e)\n",
 "repeat_axis": "r = M.repeat(2, axis=1)\n",
 "repeat": "r = Z.repeat(2)\n",
 "repeat_arr": "r = M.repeat([1, 2], axis=0)\n",
 "flat": "r = list(Z.flat)\ns = Z.flat[2]\n",
 "flat_set": "Z.flat[1] = 10.\nr = Z + 0\n",
 "strides": "s = M.strides\ni = M.itemsize\nn = M.nbytes\n",
 "view_dtype": "r = Z.view(np.int64)\n",
 "view_i32": "r = Z.astype(np.float32).view(np.int32)\n",
 "view_struct": "st = np.zeros(3, dtype=[('a', 'f8'), ('b', 'i4')])\nr = st.view(np.recarray)\n",
 "view_plain": "r = Z.view()\nr[0] = 100\nq = Z + 0\n",
 "setitem_int": "Z[1] = 9\nr = Z + 0\n",
 "setitem_slice": "Z[1:3] = [7, 8]\nr = Z + 0\n",
 "setitem_fancy": "Z[[0, 4]] = 1\nr = Z + 0\n",
 "setitem_mask": "Z[Z > 2] = 0\nr = Z + 0\n",
 "setitem_ellipsis": "M[..., 1] = -1\nr = M + 0\n",
 "setitem_none": "M[None, 0] = 5\nr = M + 0\n",
 "setitem_tuple_arr": "M[np.array([0, 1]), np.array([2, 0])] = 3\nr = M + 0\n",
 "setitem_neg_step": "Z[::-2] = 0\nr = Z + 0\n",
 "iadd_slice": "M[:, 1] += 10\nr = M + 0\n",
 "item": "v = Z.item(2)\nw = M.item((1, 2))\n",
 "tolist": "v = M.tolist()\n",
 "copyto": "np.copyto(Z, 1.5)\nr = Z + 0\n",
 "out": "np.add(Z, 1, out=Z)\nr = Z + 0\n",
 "clip_out": "Z.clip(2, 4, out=Z)\nr = Z + 0\n",
 "argsort": "r = Z.argsort()\n",
 "sort_fn": "r = np.sort(Z)\n",
 "T": "r = M.T.copy()\nt = M.transpose(1, 0)\n",
 "nonzero": "r = Z.nonzero()\n",
 "searchsorted": "r = np.sort(Z).searchsorted(3.5)\n",
 "cumsum": "r = M.cumsum(axis=1)\n",
 "round": "r = (Z / 3).round(2)\n",
 "swapaxes": "r = M.swapaxes(0, 1)\n",
 "squeeze": "r = M[None].squeeze()\n",
 "dtype_attr": "d = M.dtype\nk = M.dtype.kind\nsh = M.shape\nnd = M.ndim\n",
 "astype": "r = M.astype(int)\n",
 "real_imag": "r = M.real + M.imag\n",
 "conj": "r = M.conj()\n",
 "dot": "r = M.dot(M.T)\n",
 "ptp": "r = np.ptp(M, axis=0)\n",
 "diagonal": "r = np.arange(9.).reshape(3,3).diagonal()\n",
 "trace": "r = np.arange(9.).reshape(3,3).trace()\n",
 "compress": "r = Z.compress([True, False, True, False, True])\n",
 "choose": "r = np.array([0, 1, 0]).choose([[1, 2, 3], [4, 5, 6]])\n",
 "take": "r = Z.take([0, 3])\n",
 "flatten": "r = M.flatten()\nq = M.ravel()\n",
 "tobytes": "b = M.tobytes()\n",
 "all_any": "a = (Z > 0).all()\nb = (Z > 4).any()\n",
 "mean_keep": "r = M.mean(axis=1, keepdims=True)\n",
 "var_ddof": "r = M.var(ddof=1)\n",
 "prod": "r = M.prod(axis=0)\n",
}

# these need a real ndarray (they change the array object, or alias memory under another
# dtype): the compiled attempt stops and the cell runs plainly, with the reason in the report
PLAIN = {"resize": "resize", "setflags": "setflags",
         "view_i32": "view(dtype)", "clip_out": "out="}


@pytest.fixture(scope="module")
def shell():
    sh = harness.get_shell("numpy")
    yield sh
    sh.run_line_magic("nbaccel", "config report=auto backend=auto")


@pytest.mark.parametrize("name", sorted(CASES))
def test_method_cell_matches_plain(shell, name):
    cell = catalogue.Cell(name, CASES[name], setup=SETUP)
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(plain, comp) == []
    if name in PLAIN:
        assert comp.fallback and PLAIN[name] in comp.fallback, comp.fallback
    else:
        assert comp.fallback is None, comp.fallback


def test_regression_sort_in_place_prints_sorted(shell):
    cell = catalogue.Cell("sort_print", "Z = np.array([3., 1., 2.]); Z.sort(); print(Z)\n")
    comp = harness.run(shell, cell, compiled=True)
    assert comp.stdout == "[1. 2. 3.]\n"
    assert comp.fallback is None


def test_regression_repeat_axis(shell):
    cell = catalogue.Cell("repeat_axis1", "a = np.arange(4).reshape(2, 2)\nb = a.repeat(2, axis=1)\n")
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(plain, comp) == []
    np.testing.assert_array_equal(comp.names["b"], [[0, 0, 1, 1], [2, 2, 3, 3]])


def test_tensors_keep_pytorch_methods_outside_numpy_code():
    t = nb.tensor(np.array([3.0, 1.0, 2.0]))
    vals, idx = t.sort()
    np.testing.assert_array_equal(vals.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(t.repeat(2).numpy(), [3.0, 1.0, 2.0, 3.0, 1.0, 2.0])   # tile
    assert t.view(3, 1).shape == (3, 1)


def test_numpy_code_on_one_thread_leaves_another_threads_tensors_alone():
    # a cell's NumPy code (numpy_code) on one thread; meanwhile another thread's NumPy-flavoured
    # tensor (nbaccel.numpy's result, outside any cell) keeps PyTorch's methods, as outside it
    import threading
    from nbaccel import ndarray_methods
    inside, done = threading.Event(), threading.Event()

    def cell():
        with ndarray_methods.numpy_code():
            inside.set()
            done.wait(10)
    worker = threading.Thread(target=cell)
    worker.start()
    try:
        assert inside.wait(10)
        t = nb.numpy.asarray(np.array([3.0, 1.0, 2.0]))
        assert t._np
        np.testing.assert_array_equal(t.repeat(2).numpy(), [3.0, 1.0, 2.0, 3.0, 1.0, 2.0])   # tile
        vals, idx = t.sort()
        np.testing.assert_array_equal(vals.numpy(), [1.0, 2.0, 3.0])
        np.testing.assert_array_equal(t.numpy(), [3.0, 1.0, 2.0])      # not sorted in place
        with ndarray_methods.numpy_code():                            # this thread's own cell
            np.testing.assert_array_equal(t.repeat(2).numpy(), [3.0, 3.0, 1.0, 1.0, 2.0, 2.0])
    finally:
        done.set()
        worker.join()


def test_numpy_only_attributes_on_numpy_flavoured_tensors():
    t = nb.asarray(np.array([3.0, 1.0, 2.0]))
    assert t.strides == (8,)
    assert list(t.flat) == [3.0, 1.0, 2.0]
    assert t.searchsorted is not None
    with pytest.raises(AttributeError):
        nb.tensor([1.0]).strides            # a PyTorch-made tensor has no NumPy-only attributes


@pytest.mark.parametrize("src", ["Z = np.array([3., 1., 2.]); Z += 1; print(Z)\n",
                                 "Z = np.array([3., 1., 2.]); Z.fill(2); print(Z)\n",
                                 "Z = np.zeros(3); Z[1:] = 5; print(Z.sum())\n"])
def test_regression_in_place_on_a_cell_made_array_then_read(shell, src):
    # a concrete array written in place inside the trace, then read: a bare-id KeyError before
    cell = catalogue.Cell("inplace_read", src)
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(plain, comp) == []
    assert comp.fallback is None, comp.fallback


@pytest.mark.parametrize("src", ["s = A * 2\nnp.cumsum(A, axis=1, out=A)\n",
                                 "s = A.cumsum(axis=0)\nA.cumsum(axis=1, out=A)\n",
                                 "s = Z * 2\nnp.random.shuffle(Z)\nt = Z + 0\n",
                                 "s = Z * 2\nnp.copyto(Z, 1.5)\nt = Z + 0\n",
                                 "s = Z + 1\nnp.put(Z, [0], [9.0])\n",
                                 "s = A.sum(dtype=np.int32)\nr = A.ravel('F')\nq = np.ravel(A, order='F')\n"])
def test_regression_writes_through_numpy_after_pending_reads(shell, src):
    # NumPy writing into an input's own buffer must not change what was computed before it
    # (a pending read of the input saw the write: a silent wrong answer)
    cell = catalogue.Cell("alias", src, setup=SETUP + "A = np.arange(12.0).reshape(3, 4)\nnp.random.seed(0)\n")
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(plain, comp) == []


@pytest.mark.parametrize("src", ["r = (M / 3).round(1, out=None)\n", "r = M.sum(axis=0, out=None)\n",
                                 "r = M.cumsum(axis=1, dtype=None, out=None)\n", "r = M.max(axis=0, initial=-9)\n"])
def test_numpy_keywords_a_tensor_method_lacks_never_show_an_error(shell, src):
    cell = catalogue.Cell("kw", src, setup=SETUP)
    plain = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(plain, comp) == []


@pytest.mark.parametrize("src,plain", [("s = A.strides\nf = A.flags['C_CONTIGUOUS']\n", False),
                                       ("s = A.T.strides\n", True), ("A += 1\ns = A.strides\n", True),
                                       ("s = A[:, ::2].strides\n", True)])
def test_strides_of_an_input_as_it_came_in_are_its_own(shell, src, plain):
    # an unmodified input answers from its own array; a computed view's layout needs NumPy
    cell = catalogue.Cell("strides", src, setup="import numpy as np\nA = np.arange(12.0).reshape(3, 4)\n")
    p = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(p, comp) == []
    assert (comp.fallback is not None) == plain, comp.fallback


@pytest.mark.parametrize("src,plain", [("r = Z.view(np.int64)\n", False),
                                       ("s = Z * 2\nb = Z.view(np.int64)\nb[0] = 0\nt = Z + 1\n", False),
                                       ("b = Z.view(np.uint64)\nm = (b >> 52) & 0x7ff\n", False),
                                       ("r = Z.astype(np.float32).view(np.int32)\n", True),
                                       ("Z += 1\nb = Z.view(np.int64)\n", True)])
def test_regression_view_dtype(shell, src, plain):
    # .view(dtype) of an input aliases its memory (writes through it reach the input, after
    # the pending reads of it); of a computed array the cell runs plainly
    cell = catalogue.Cell("view", src, setup=SETUP)
    p = harness.run(shell, cell, compiled=False)
    comp = harness.run(shell, cell, compiled=True)
    assert harness.differences(p, comp) == []
    assert (comp.fallback is not None) == plain, comp.fallback


def test_regression_item_break_says_a_python_number_is_needed(shell):
    """.item() has an op-free meaning, not a missing op: its break reason says what it needs."""
    shell.run_cell("import numpy as np\nx = np.linspace(0.0, 1.0, 12).reshape(3, 4)\n")
    shell.run_cell("%%compile --backend numpy -o rep\nm = x.mean()\nv = round(m.item(), 4)\nz = np.tanh(x - m)\n")
    reasons = [b["reason"] for b in shell.user_ns["rep"].graph_breaks]
    assert reasons == ["a Python scalar is needed (ndarray.item())"], reasons
    assert shell.user_ns["v"] == round(float(np.linspace(0.0, 1.0, 12).mean()), 4)

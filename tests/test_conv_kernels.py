"""The convolution kernels (nbaccel_kernels.conv) against their NumPy reference, and the
reference against the definition (adjoint identities, a hand-written loop) and PyTorch."""
import os

import numpy as np
import pytest

from nbaccel_kernels.conv import Conv2dGeometry, cpu, reference

# (x shape, w shape, stride, ((top, bottom), (left, right)), dilation, groups)
CASES = [
    ((2, 4, 7, 6), (6, 2, 3, 2), (2, 1), ((1, 0), (2, 1)), (1, 2), 2),
    ((1, 3, 5, 5), (4, 3, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),
    ((2, 8, 9, 9), (16, 8, 3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), 1),   # im2col + BLAS
    ((2, 6, 5, 5), (12, 1, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 6),   # depthwise, x2
    ((2, 5, 4, 4), (3, 5, 1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), 1),   # 1x1: no im2col
    ((1, 2, 2, 2), (3, 2, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),   # kernel > input
    ((2, 8, 6, 7), (4, 4, 3, 3), (3, 2), ((2, 1), (0, 2)), (2, 1), 2),
    ((1, 1, 1, 9), (2, 1, 1, 4), (1, 3), ((0, 0), (3, 0)), (1, 1), 1),   # a 1-D one
    # stride 1 with >= 16 channels a group: shifted GEMMs (shifted.py)
    ((2, 16, 7, 6), (5, 16, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),
    ((1, 32, 6, 9), (6, 16, 3, 2), (1, 1), ((2, 0), (0, 1)), (2, 3), 2),  # groups, dilation, asymmetric
    ((2, 16, 5, 5), (3, 16, 2, 2), (1, 1), ((3, 2), (2, 3)), (1, 1), 1),  # padding past the kernel
    ((1, 16, 4, 8), (4, 16, 1, 5), (1, 1), ((0, 0), (2, 2)), (1, 1), 1),  # 'same' along the width
    ((3, 16, 3, 3), (2, 16, 3, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), 1),  # one output pixel
]
SHIFTED = CASES[8:]


def _data(case, dtype, seed=0):
    rng = np.random.default_rng(seed)
    xs, ws = case[:2]
    return rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)


def _naive(x, w, stride, padding, dilation, groups):
    g = Conv2dGeometry(x.shape, w.shape, stride, padding, dilation, groups)
    y = np.zeros(g.out_shape)
    for n, o, r, q in np.ndindex(*g.out_shape):
        for c, i, j in np.ndindex(g.cg, g.kh, g.kw):
            ih, iw = r * g.sh - g.pt + i * g.dh, q * g.sw - g.pl + j * g.dw
            if 0 <= ih < g.h and 0 <= iw < g.w:
                y[n, o, r, q] += w[o, c, i, j] * x[n, (o // g.og) * g.cg + c, ih, iw]
    return y


@pytest.mark.parametrize("case", CASES[:2] + CASES[5:])
def test_reference_is_the_definition(case):
    x, w = _data(case, np.float64)
    np.testing.assert_allclose(reference.conv2d_forward(x, w, *case[2:]), _naive(x, w, *case[2:]),
                               atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_reference_gradients_are_adjoints(case):
    """<conv(x, w), gy> = <x, dx(gy)> = <w, dw(gy)>: the gradients are exact adjoints."""
    x, w = _data(case, np.float64)
    y = reference.conv2d_forward(x, w, *case[2:])
    gy = np.random.default_rng(1).standard_normal(y.shape)
    gx = reference.conv2d_backward_input(gy, w, x.shape[2:], *case[2:])
    gw = reference.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:])
    assert np.isclose((y * gy).sum(), (x * gx).sum())
    assert np.isclose((y * gy).sum(), (w * gw).sum())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_cpu_matches_reference(case, dtype):
    x, w = _data(case, dtype)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    y = cpu.conv2d_forward(x, w, *case[2:])
    assert y.dtype == dtype
    np.testing.assert_allclose(y, reference.conv2d_forward(x, w, *case[2:]), **tol)
    gy = np.random.default_rng(2).standard_normal(y.shape).astype(dtype)
    np.testing.assert_allclose(cpu.conv2d_backward_input(gy, w, x.shape[2:], *case[2:]),
                               reference.conv2d_backward_input(gy, w, x.shape[2:], *case[2:]), **tol)
    np.testing.assert_allclose(cpu.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:]),
                               reference.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:]),
                               **tol)


def test_cpu_batch_chunks(monkeypatch):
    """The im2col buffer covers part of the batch at a time: the chunks give the same result."""
    case = CASES[2]
    x, w = _data(case, np.float64)
    whole = cpu.conv2d_forward(x, w, *case[2:])
    gy = np.ones_like(whole)
    gw_whole = cpu.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:])
    monkeypatch.setattr(cpu, "COLS_BYTES", 1)
    np.testing.assert_allclose(cpu.conv2d_forward(x, w, *case[2:]), whole, rtol=1e-12)
    np.testing.assert_allclose(cpu.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:]), gw_whole,
                               rtol=1e-12)


@pytest.mark.parametrize("case", SHIFTED)
def test_shifted_cases_take_the_shifted_path(case, monkeypatch):
    """The cases above really run shifted.py, and its NumPy fallback (no OpenBLAS) agrees."""
    from nbaccel_kernels import _openblas
    from nbaccel_kernels.conv import shifted
    monkeypatch.setattr(cpu, "SHIFTED_MIN_PIXELS", 0)   # (these cases' planes are small)
    x, w = _data(case, np.float64)
    g = Conv2dGeometry(x.shape, w.shape, *case[2:])
    assert cpu._shifted(g)
    calls = []
    real = shifted.forward
    monkeypatch.setattr(shifted, "forward", lambda *a: calls.append(1) or real(*a))
    y = cpu.conv2d_forward(x, w, *case[2:])
    assert calls
    monkeypatch.setattr(_openblas, "_cblas", lambda dtype: None)
    np.testing.assert_allclose(cpu.conv2d_forward(x, w, *case[2:]), y, rtol=1e-12, atol=1e-12)
    gy = np.random.default_rng(4).standard_normal(y.shape)
    np.testing.assert_allclose(cpu.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:]),
                               reference.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:]), atol=1e-10)



@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shifted_blocks_of_images_share_each_taps_gemm(monkeypatch, dtype):
    """shifted.py runs one GEMM per tap for a block of images (their padded planes side by
    side), not one per image and tap. Windows that run past an image's last column read the
    next row or image: outputs there are dropped (forward), and the weight gradient's zeros
    there would turn an inf of the input into NaN, so cpu takes im2col for a non-finite x."""
    from nbaccel_kernels.conv import shifted
    monkeypatch.setattr(shifted, "num_threads", lambda: 1)
    monkeypatch.setattr(cpu, "SHIFTED_MIN_PIXELS", 0)
    case = ((5, 16, 6, 7), (4, 16, 3, 3), (1, 1), ((1, 1), (0, 2)), (1, 1), 1)
    x, w = _data(case, dtype)
    g = Conv2dGeometry(x.shape, w.shape, *case[2:])
    assert shifted._blocks(g, x.itemsize) == [(0, 5)] and cpu._shifted(g)
    calls = []
    real = shifted.gemm
    monkeypatch.setattr(shifted, "gemm", lambda *a, **k: calls.append(1) or real(*a, **k))
    tol = dict(rtol=1e-4, atol=1e-3) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    y = cpu.conv2d_forward(x, w, *case[2:])
    assert len(calls) == 9
    np.testing.assert_allclose(y, reference.conv2d_forward(x, w, *case[2:]), **tol)
    gy = np.random.default_rng(4).standard_normal(y.shape).astype(dtype)
    gw = cpu.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:])
    assert len(calls) == 18
    np.testing.assert_allclose(gw, reference.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:]),
                               **tol)
    x[1, 3, 0, 0] = np.inf                      # first column of an image (no left padding)
    np.testing.assert_allclose(cpu.conv2d_forward(x, w, *case[2:]),
                               reference.conv2d_forward(x, w, *case[2:]), **tol)
    assert np.isnan(shifted.backward_weight(x, gy, g, np.empty(w.shape, dtype))).any()
    np.testing.assert_allclose(cpu.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:]),
                               reference.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:]),
                               **tol)



def test_shifted_buffers_are_kept_per_layout(monkeypatch):
    """shifted.py keeps each thread's padded buffers between calls (made per call they cost
    an mmap each), but only for the same layout: a convolution whose padded planes have the
    same size with the padding elsewhere must not read the last one's data as padding."""
    from nbaccel_kernels.conv import shifted
    monkeypatch.setattr(shifted, "num_threads", lambda: 1)
    monkeypatch.setattr(cpu, "SHIFTED_MIN_PIXELS", 0)
    x, w = _data(((3, 16, 6, 6), (4, 16, 3, 3)), np.float64)
    first, second = ((1, 1), (1, 1)), ((2, 0), (0, 2))       # both 8x8 padded planes
    for pads in (first, second, first):
        y = cpu.conv2d_forward(x, w, (1, 1), pads, (1, 1), 1)
        np.testing.assert_allclose(y, reference.conv2d_forward(x, w, (1, 1), pads, (1, 1), 1),
                                   rtol=1e-10, atol=1e-10)
    made = []
    real = np.zeros
    monkeypatch.setattr(shifted.np, "zeros", lambda *a, **k: made.append(a) or real(*a, **k))
    cpu.conv2d_forward(x, w, (1, 1), first, (1, 1), 1)
    assert made == []
    # buffers past _KEEP_BYTES live for one call: made once for its blocks, and not kept
    from nbaccel_kernels import _tasks
    monkeypatch.setattr(_tasks, "num_threads", lambda: 1)          # one thread's scratch
    monkeypatch.setattr(shifted, "_KEEP_BYTES", 1)
    monkeypatch.setattr(shifted, "BLOCK_BYTES", 1)                # one image a block
    assert len(shifted._blocks(Conv2dGeometry(x.shape, w.shape, (1, 1), first, (1, 1), 1), 8)) == 3
    for _ in range(2):
        made.clear()
        y = cpu.conv2d_forward(x, w, (1, 1), first, (1, 1), 1)
        assert len(made) == 2                                      # padded input, output
    np.testing.assert_allclose(y, reference.conv2d_forward(x, w, (1, 1), first, (1, 1), 1),
                               rtol=1e-10, atol=1e-10)

def test_geometry_errors_name_the_problem():
    with pytest.raises(ValueError, match="larger than the padded input"):
        Conv2dGeometry((1, 1, 2, 2), (1, 1, 3, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), 1)
    with pytest.raises(ValueError, match="channels"):
        Conv2dGeometry((1, 3, 4, 4), (2, 2, 3, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), 1)
    with pytest.raises(TypeError, match="float32 or float64"):
        cpu.conv2d_forward(np.ones((1, 1, 3, 3), np.int64), np.ones((1, 1, 1, 1), np.int64),
                           (1, 1), ((0, 0), (0, 0)), (1, 1), 1)


def test_empty_batch_and_channels():
    y = cpu.conv2d_forward(np.ones((0, 2, 4, 4), np.float32), np.ones((3, 2, 3, 3), np.float32),
                           (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    assert y.shape == (0, 3, 4, 4)


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3], CASES[7]])
def test_triton_matches_reference(case):
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the Triton kernels are tested under TRITON_INTERPRET=1")
    pytest.importorskip("triton")
    from nbaccel_kernels.conv import triton as tk
    x, w = _data(case, np.float32)
    y = tk.conv2d_forward(x, w, *case[2:])
    np.testing.assert_allclose(y, reference.conv2d_forward(x, w, *case[2:]), rtol=1e-4, atol=1e-4)
    gy = np.random.default_rng(3).standard_normal(y.shape).astype(np.float32)
    np.testing.assert_allclose(tk.conv2d_backward_input(gy, w, x.shape[2:], *case[2:]),
                               reference.conv2d_backward_input(gy, w, x.shape[2:], *case[2:]),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tk.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:]),
                               reference.conv2d_backward_weight(x, gy, w.shape[2:], *case[2:]),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", CASES)
def test_reference_matches_pytorch(case):
    torch = pytest.importorskip("torch")
    x, w = _data(case, np.float64)
    (pt, pb), (pl, pr) = case[3]
    xt = torch.nn.functional.pad(torch.from_numpy(x), (pl, pr, pt, pb))
    expect = torch.nn.functional.conv2d(xt, torch.from_numpy(w), stride=case[2],
                                        dilation=case[4], groups=case[5]).numpy()
    np.testing.assert_allclose(reference.conv2d_forward(x, w, *case[2:]), expect, atol=1e-10)


def test_small_planes_take_im2col():
    """Below SHIFTED_MIN_PIXELS output pixels per plane (notebook 11's 4x4 and 8x8 planes),
    im2col and one batched GEMM run the forward and the weight gradient instead of shifted.py's
    GEMMs per tap."""
    small = Conv2dGeometry((64, 16, 8, 8), (32, 16, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    large = Conv2dGeometry((64, 16, 14, 14), (32, 16, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    assert not cpu._shifted(small) and cpu._shifted(large)
    # the input gradient takes the shifted GEMMs at any size (im2col's col2im is slower)
    assert cpu._shifted(small, input_gradient=True)

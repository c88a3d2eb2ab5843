"""nbaccel_kernels.rnn: the LSTM time loop on arrays against a step-by-step NumPy LSTM
(forward) and against central differences and the op table's derivative (backward)."""
import numpy as np
import pytest

from nbaccel_kernels.rnn import cpu


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _inputs(L=5, N=3, H=4, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    xw = rng.standard_normal((L, N, 4 * H)).astype(dtype)
    h0, c0 = (rng.standard_normal((N, H)).astype(dtype) for _ in range(2))
    w = (rng.standard_normal((4 * H, H)) / 2).astype(dtype)
    return xw, h0, c0, w


def _reference(xw, h0, c0, w):
    H = h0.shape[1]
    h, c, out = h0, c0, []
    for t in range(xw.shape[0]):
        z = xw[t] + h @ w.T
        i, f, g, o = _sig(z[:, :H]), _sig(z[:, H:2 * H]), np.tanh(z[:, 2 * H:3 * H]), _sig(z[:, 3 * H:])
        c = f * c + i * g
        h = o * np.tanh(c)
        out.append(np.concatenate([h, c, i, f, g, o], -1))
    return np.stack(out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("L,N,H", [(1, 1, 1), (5, 3, 4), (7, 2, 9)])
def test_forward_matches_a_step_by_step_lstm(dtype, L, N, H):
    args = _inputs(L, N, H, dtype)
    Y = cpu.lstm_scan_forward(*args)
    assert Y.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(Y, _reference(*args), rtol=tol, atol=tol)


@pytest.mark.parametrize("L,N,H", [(1, 2, 3), (4, 3, 2)])
def test_backward_matches_central_differences(L, N, H):
    xw, h0, c0, w = _inputs(L, N, H)
    gY = np.random.default_rng(9).standard_normal((L, N, 6 * H))
    Y = cpu.lstm_scan_forward(xw, h0, c0, w)
    grads = cpu.lstm_scan_backward(gY, Y, xw, h0, c0, w)
    for which, (arg, got) in enumerate(zip((xw, h0, c0, w), grads)):
        num = np.zeros_like(arg)
        for idx in np.ndindex(arg.shape):
            hi, lo = [a.copy() for a in (xw, h0, c0, w)], [a.copy() for a in (xw, h0, c0, w)]
            hi[which][idx] += 1e-6
            lo[which][idx] -= 1e-6
            num[idx] = ((cpu.lstm_scan_forward(*hi) - cpu.lstm_scan_forward(*lo)) * gY).sum() / 2e-6
        np.testing.assert_allclose(got, num, rtol=1e-6, atol=1e-7, err_msg=f"argument {which}")


def test_backward_equals_the_op_tables_derivative():
    """The array loop and the derivative written with ops (used when a graph of the derivative
    is recorded: create_graph, compiled steps) agree."""
    nb = pytest.importorskip("nbaccel")
    from nbaccel.ops import rnn_scan
    xw, h0, c0, w = _inputs(6, 3, 5, np.float32)
    gY = np.random.default_rng(2).standard_normal((6, 3, 30)).astype(np.float32)
    Y = cpu.lstm_scan_forward(xw, h0, c0, w)
    want = rnn_scan._grad_ops(*(nb.tensor(a) for a in (gY, Y, xw, h0, c0, w)))
    for got, ref in zip(cpu.lstm_scan_backward(gY, Y, xw, h0, c0, w), want):
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-6)

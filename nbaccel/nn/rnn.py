"""Recurrent layers: ``RNN``, ``LSTM``, ``GRU`` and their cells, with PyTorch's parameters.

Parameter names, shapes, order and initialisation are PyTorch's (``weight_ih_l{k}``,
``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``, ``_reverse`` for the backward
direction; gate order i, f, g, o for LSTM and r, z, n for GRU; every weight and bias drawn
from U(-1/sqrt(hidden), 1/sqrt(hidden))), so ``load_state_dict`` of a PyTorch checkpoint's
arrays works in both directions.

How it runs: the input projection of every time step is one matmul per layer and direction
(``x @ W_ih.T + b_ih`` over the whole sequence); the time loop then does one ``h @ W_hh.T``
and the cell's pointwise math per step. Everything is nbaccel ops, so autograd gives
backpropagation through time, and a compiled function captures the unrolled loop, where each
step's pointwise ops fuse into one kernel after its matmul.

>>> import nbaccel as nb
>>> lstm = nb.nn.LSTM(8, 16, num_layers=2, batch_first=True)
>>> out, (h, c) = lstm(nb.randn(4, 5, 8))
>>> out.shape, h.shape, c.shape
((4, 5, 16), (2, 4, 16), (2, 4, 16))
"""
from __future__ import annotations

import math

from .. import ops
from ..convert import tensor as _tensor
from . import functional as F
from . import init
from .module import Module
from .modules import _empty
from .rnn_utils import PackedSequence, _unpack

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


# ---- the cells' math (shared by the layers and the Cell modules) --------------------------------

def _lstm_step(xw, h, c, w_hh, b_hh):
    """One LSTM step; ``xw`` is the input projection (with b_ih) of this step."""
    gates = xw + F.linear(h, w_hh, b_hh)
    n = c.shape[-1]
    s = ops.sigmoid(gates)
    i, f, o = s[..., :n], s[..., n:2 * n], s[..., 3 * n:]
    g = ops.tanh(gates[..., 2 * n:3 * n])
    c = f * c + i * g
    return o * ops.tanh(c), c


def _gru_step(xw, h, w_hh, b_hh):
    hw = F.linear(h, w_hh, b_hh)
    n = h.shape[-1]
    rz = ops.sigmoid(xw[..., :2 * n] + hw[..., :2 * n])
    r, z = rz[..., :n], rz[..., n:]
    cand = ops.tanh(xw[..., 2 * n:] + r * hw[..., 2 * n:])
    return cand + z * (h - cand)          # (1 - z) * n + z * h


def _rnn_step(xw, h, w_hh, b_hh, relu):
    pre = xw + F.linear(h, w_hh, b_hh)
    return F.relu(pre) if relu else ops.tanh(pre)


def _bound(hidden_size):
    return 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0


# ---- the layers ---------------------------------------------------------------------------------

class RNNBase(Module):
    """What RNN, LSTM and GRU share: the parameters, the input layouts, the layer loop."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError("hidden_size must be a positive integer")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError("num_layers must be a positive integer")
        if not isinstance(proj_size, int) or proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        gate = _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        real = proj_size or hidden_size           # the size of h (the projection's output)
        self._flat_weights_names = []
        for layer in range(num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                width = input_size if layer == 0 else real * dirs
                shapes = [("weight_ih", (gate, width)), ("weight_hh", (gate, real))]
                if bias:
                    shapes += [("bias_ih", (gate,)), ("bias_hh", (gate,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + sfx, _empty(shape, device, dtype))
                    self._flat_weights_names.append(name + sfx)
        self.reset_parameters()

    def reset_parameters(self):
        b = _bound(self.hidden_size)
        for w in self.parameters():
            init.uniform_(w, -b, b)

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    def flatten_parameters(self):
        """cuDNN's weight packing in PyTorch; nothing to do here."""

    def _weights(self, layer, d):
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        g = lambda n: getattr(self, n + sfx) if self.bias or n.startswith("weight") else None  # noqa: E731
        return g("weight_ih"), g("weight_hh"), g("bias_ih"), g("bias_hh")

    def _proj(self, layer, d):
        """weight_hr of this layer and direction (LSTM with proj_size), or None."""
        if not self.proj_size:
            return None
        return getattr(self, f"weight_hr_l{layer}" + ("_reverse" if d else ""))

    def _layout(self, input, hx):
        """(input as (L, N, H_in), hx as (D*layers, N, H) or None, batched?)"""
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{input.ndim}D instead")
        batched = input.ndim == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        if input.shape[-1] != self.input_size:
            raise ValueError(f"input.size(-1) must be equal to input_size. Expected "
                             f"{self.input_size}, got {input.shape[-1]}")
        return input, batched

    def _state(self, hx, batched, n, like, size=None):
        dirs = 2 if self.bidirectional else 1
        want = (self.num_layers * dirs, n, size or self.hidden_size)
        if hx is None:
            return ops.zeros(want, dtype=like.dtype, device=like.device)
        if not batched:
            if hx.ndim != 2:
                raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got "
                                   f"{hx.ndim}-D tensor")
            hx = hx.unsqueeze(1)
        if tuple(hx.shape) != want:
            raise RuntimeError(f"Expected hidden size {want}, got {tuple(hx.shape)}")
        return hx

    def _run(self, x, states, mask=None):
        """The layer loop over (L, N, H_in) ``x``; ``states`` is a list per state kind
        (h, and c for LSTM) of (D*layers, N, H) tensors. Returns (output, final states).
        ``mask`` (L, N, 1) bool, for packed input: where False the state is kept and the
        output is 0."""
        dirs = 2 if self.bidirectional else 1
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, d)
                w_hr = self._proj(layer, d)
                xw = F.linear(x, w_ih, b_ih)                    # every step's projection at once
                cur = [s[k] for s in states]
                seq = [None] * x.shape[0]
                steps = range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])
                for t in steps:
                    new = self._cell(xw[t], cur, w_hh, b_hh)
                    if w_hr is not None:
                        new = [F.linear(new[0], w_hr)] + new[1:]
                    if mask is not None:
                        new = [ops.where(mask[t], a, b) for a, b in zip(new, cur)]
                        seq[t] = ops.where(mask[t], new[0], 0.0)
                    else:
                        seq[t] = new[0]
                    cur = new
                outs.append(ops.stack(seq, 0) if seq else
                            ops.zeros((0,) + tuple(cur[0].shape), dtype=x.dtype, device=x.device))
                for f, c in zip(finals, cur):
                    f.append(c)
            x = outs[0] if dirs == 1 else ops.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, [ops.stack(f, 0) for f in finals]

    def _finish(self, out, batched):
        if not batched:
            return out.squeeze(1)
        return out.transpose(0, 1) if self.batch_first else out

    def _packed(self, packed, hx, n_states):
        """Run a PackedSequence: (output PackedSequence, final states in the caller's order)."""
        x, lens = _unpack(packed)
        mask = ops.arange(x.shape[0]).reshape((-1, 1, 1)) < _tensor(lens).reshape((1, -1, 1))
        order = packed.sorted_indices
        hs = [None] * n_states if hx is None else list(hx if n_states > 1 else (hx,))
        sizes = [self.proj_size or self.hidden_size] + [self.hidden_size] * (n_states - 1)
        hs = [self._state(h if h is None or order is None else h[:, order.numpy()], True,
                          x.shape[1], x, size) for h, size in zip(hs, sizes)]
        out, finals = RNNBase._run(self, x, hs, mask)
        data = ops.cat([out[t, :b] for t, b in enumerate(packed.batch_sizes.tolist())], 0)
        if packed.unsorted_indices is not None:
            finals = [f[:, packed.unsorted_indices.numpy()] for f in finals]
        return PackedSequence(data, packed.batch_sizes, packed.sorted_indices,
                              packed.unsorted_indices), finals

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            out, (hn,) = self._packed(input, hx, 1)
            return out, hn
        x, batched = self._layout(input, hx)
        h0 = self._state(hx, batched, x.shape[1], x)
        out, (hn,) = self._run(x, [h0])
        return self._finish(out, batched), (hn if batched else hn.squeeze(1))

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        return s


class RNN(RNNBase):
    """Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu with
    ``nonlinearity='relu'``). ``forward(input, hx=None) -> (output, h_n)``."""

    def __init__(self, *args, nonlinearity: str = "tanh", **kwargs):
        if len(args) > 3:               # PyTorch's positional order puts nonlinearity 4th
            args = list(args)
            nonlinearity = args.pop(3)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)

    def _cell(self, xw, cur, w_hh, b_hh):
        return [_rnn_step(xw, cur[0], w_hh, b_hh, self.nonlinearity == "relu")]

    def extra_repr(self):
        s = super().extra_repr()
        return s + (", nonlinearity='relu'" if self.nonlinearity == "relu" else "")


class LSTM(RNNBase):
    """Long short-term memory. ``forward(input, (h_0, c_0)=None) -> (output, (h_n, c_n))``.
    Each layer and direction's time loop is one ``lstm_scan`` op (``ops/rnn_scan.py``). With
    ``proj_size`` each step's h is ``weight_hr_l{k} @ (o * tanh(c))`` (the composed loop)."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def _direction(self, x, layer, d, h0, c0):
        w_ih, w_hh, b_ih, b_hh = self._weights(layer, d)
        xw = F.linear(x, w_ih, b_ih)
        if b_hh is not None:
            xw = xw + b_hh
        if d:
            xw = ops.flip(xw, 0)
        y = ops.lstm_scan(xw, h0, c0, w_hh)
        if d:
            y = ops.flip(y, 0)
        n = self.hidden_size
        last = y[0] if d else y[-1]
        return y[..., :n], last[..., :n], last[..., n:2 * n]

    def _run(self, x, states, mask=None):
        if x.shape[0] == 0 or mask is not None or self.proj_size:
            return super()._run(x, states, mask)
        dirs = 2 if self.bidirectional else 1
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                out, h, c = self._direction(x, layer, d, states[0][k], states[1][k])
                outs.append(out)
                hs.append(h)
                cs.append(c)
            x = outs[0] if dirs == 1 else ops.cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, [ops.stack(hs, 0), ops.stack(cs, 0)]

    def _cell(self, xw, cur, w_hh, b_hh):
        return list(_lstm_step(xw, cur[0], cur[1], w_hh, b_hh))

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):    # (masked: the composed loop, not lstm_scan)
            out, (hn, cn) = self._packed(input, hx, 2)
            return out, (hn, cn)
        x, batched = self._layout(input, hx)
        if hx is not None and not isinstance(hx, (tuple, list)):
            raise RuntimeError("LSTM expects hx as a tuple (h_0, c_0)")
        h0 = self._state(None if hx is None else hx[0], batched, x.shape[1], x,
                         self.proj_size or self.hidden_size)
        c0 = self._state(None if hx is None else hx[1], batched, x.shape[1], x)
        out, (hn, cn) = self._run(x, [h0, c0])
        if not batched:
            hn, cn = hn.squeeze(1), cn.squeeze(1)
        return self._finish(out, batched), (hn, cn)


class GRU(RNNBase):
    """Gated recurrent unit. ``forward(input, hx=None) -> (output, h_n)``."""

    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)

    def _cell(self, xw, cur, w_hh, b_hh):
        return [_gru_step(xw, cur[0], w_hh, b_hh)]


# ---- cells ---------------------------------------------------------------------------------------

class RNNCellBase(Module):
    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = _empty((num_chunks * hidden_size, input_size), device, dtype)
        self.weight_hh = _empty((num_chunks * hidden_size, hidden_size), device, dtype)
        if bias:
            self.bias_ih = _empty((num_chunks * hidden_size,), device, dtype)
            self.bias_hh = _empty((num_chunks * hidden_size,), device, dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        b = _bound(self.hidden_size)
        for w in self.parameters():
            init.uniform_(w, -b, b)

    def _prepare(self, input, hx):
        if input.ndim not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.ndim}D instead")
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            hx = ops.zeros((input.shape[0], self.hidden_size), dtype=input.dtype, device=input.device)
        elif not batched:
            hx = hx.unsqueeze(0)
        return input, hx, batched

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input, hx=None):
        x, h, batched = self._prepare(input, hx)
        h = _rnn_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh,
                      self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        x, _, batched = self._prepare(input, None)
        if hx is None:
            z = ops.zeros((x.shape[0], self.hidden_size), dtype=x.dtype, device=x.device)
            h, c = z, z
        else:
            h, c = (hx[0], hx[1]) if batched else (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        h, c = _lstm_step(F.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh,
                          self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, h, batched = self._prepare(input, hx)
        h = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)

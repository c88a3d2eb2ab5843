"""``nn.utils.rnn``: variable-length sequences for the recurrent layers, PyTorch's spelling.

``pad_sequence`` stacks sequences of different lengths with padding; ``pack_padded_sequence``
/ ``pack_sequence`` make a ``PackedSequence`` (PyTorch's layout: the time-major
concatenation of each step's live rows, longest sequences first, ``batch_sizes`` per step) and
``pad_packed_sequence`` undoes it. ``RNN``, ``LSTM`` and ``GRU`` take a ``PackedSequence``: they
run the padded batch with a mask, so a sequence's state stops changing after its last step
(and a reverse direction starts at each sequence's own end), and return a ``PackedSequence``.

>>> import nbaccel as nb
>>> from nbaccel.nn.utils.rnn import pad_sequence
>>> pad_sequence([nb.ones(3), nb.ones(1)], batch_first=True).tolist()
[[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]]
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import ops
from ..convert import tensor as _tensor
from ..tensor import Tensor

__all__ = ["PackedSequence", "pad_sequence", "pack_padded_sequence", "pad_packed_sequence",
           "pack_sequence"]


class PackedSequence(NamedTuple):
    data: object
    batch_sizes: object
    sorted_indices: object = None
    unsorted_indices: object = None


def _lengths(lengths):
    if isinstance(lengths, Tensor):
        lengths = lengths.tolist()
    return [int(v) for v in lengths]


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right"):
    """(L_max, B, *) (or (B, L_max, *)) from B tensors of shape (L_i, *)."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
    seqs = list(sequences)
    n = max(s.shape[0] for s in seqs)
    rows = []
    for s in seqs:
        pad = n - s.shape[0]
        if pad:
            fill = ops.full((pad,) + tuple(s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = ops.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        rows.append(s)
    return ops.stack(rows, 0 if batch_first else 1)


def pack_padded_sequence(input, lengths, batch_first: bool = False, enforce_sorted: bool = True):
    lens = _lengths(lengths)
    if enforce_sorted:
        if any(a < b for a, b in zip(lens, lens[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                               "to pack_padded_sequence and/or pack_sequence to sidestep this "
                               "requirement if you do not need ONNX exportability.")
        order = None
    else:
        order = sorted(range(len(lens)), key=lambda i: -lens[i])
    if any(v <= 0 for v in lens):
        raise RuntimeError("Length of all samples has to be greater than 0")
    x = input.transpose(0, 1) if batch_first else input           # (T, B, *)
    if order is not None:
        x = x[:, np.asarray(order, dtype=np.int64)]
        lens = [lens[i] for i in order]
    sizes = [sum(1 for v in lens if v > t) for t in range(lens[0])]
    data = ops.cat([x[t, :b] for t, b in enumerate(sizes)], 0)
    as_idx = lambda v: _tensor(v, dtype="int64")          # noqa: E731
    if order is None:
        return PackedSequence(data, as_idx(sizes))
    unsorted = [0] * len(order)
    for pos, i in enumerate(order):
        unsorted[i] = pos
    return PackedSequence(data, as_idx(sizes), as_idx(order), as_idx(unsorted))


def pad_packed_sequence(sequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length=None):
    """(padded, lengths): the inverse of ``pack_padded_sequence`` (original batch order)."""
    padded, lens = _unpack(sequence, padding_value, total_length)
    if sequence.unsorted_indices is not None:
        idx = sequence.unsorted_indices.numpy()
        padded = padded[:, idx]
        lens = [lens[i] for i in idx]
    padded = padded.transpose(0, 1) if batch_first else padded
    return padded, _tensor(lens, dtype="int64")


def _unpack(sequence, padding_value=0.0, total_length=None):
    """(padded (T, B, *) in sorted order, lengths in sorted order)."""
    sizes = _lengths(sequence.batch_sizes)
    b, data = sizes[0], sequence.data
    t_len = len(sizes) if total_length is None else int(total_length)
    if t_len < len(sizes):
        raise ValueError(f"Expected total_length to be at least {len(sizes)}, but got {t_len}")
    steps, start = [], 0
    tail = tuple(data.shape[1:])
    for s in sizes:
        row = data[start:start + s]
        if s < b:
            row = ops.cat([row, ops.full((b - s,) + tail, padding_value, dtype=data.dtype,
                                         device=data.device)], 0)
        steps.append(row)
        start += s
    for _ in range(t_len - len(sizes)):
        steps.append(ops.full((b,) + tail, padding_value, dtype=data.dtype, device=data.device))
    lens = [sum(1 for s in sizes if s > i) for i in range(b)]
    return ops.stack(steps, 0), lens


def pack_sequence(sequences, enforce_sorted: bool = True):
    seqs = list(sequences)
    return pack_padded_sequence(pad_sequence(seqs), [s.shape[0] for s in seqs],
                                enforce_sorted=enforce_sorted)

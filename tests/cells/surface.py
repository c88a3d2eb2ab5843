"""The ndarray surface, measured (issue 21, item 2; first part: every public attribute of
``np.ndarray``). Each attribute has representative calls (positional and keyword arguments,
``out=``, in-place forms); tests/test_ndarray_surface.py runs each plainly and under
``%%compile`` and requires the same result, or a plain run that says why.

``python -m tests.cells.surface`` prints the coverage table (markdown) for docs/supported-ops.md.
"""
from __future__ import annotations

from .catalogue import Cell

SETUP = ("import numpy as np\nA = np.arange(12.0).reshape(3, 4) - 5.5\nv = np.array([3.0, 1.0, 2.0, 5.0, 4.0])\n"
         "i = np.arange(6)\nb = A > 0\nz = np.array([1 + 2j, 3 - 1j])\n")

CALLS = {
    "T": ["r = A.T + 0\n"],
    "all": ["r = b.all()\ns = b.all(axis=0)\nt = b.all(1, keepdims=True)\n"],
    "any": ["r = b.any()\ns = b.any(axis=1)\n"],
    "argmax": ["r = A.argmax()\ns = A.argmax(axis=0)\nt = A.argmax(1, keepdims=True)\n"],
    "argmin": ["r = A.argmin()\ns = A.argmin(axis=1)\n"],
    "argpartition": ["r = v.argpartition(2)\n"],
    "argsort": ["r = v.argsort()\ns = A.argsort(axis=0)\nt = v.argsort(kind='stable')\n"],
    "astype": ["r = A.astype(np.float32)\ns = A.astype('int64')\nt = A.astype(dtype=bool, copy=True)\n"],
    "base": ["r = A.base is None\ns = A[1:].base is A\n"],
    "byteswap": ["r = i.byteswap()\ni.byteswap(inplace=True)\n"],
    "choose": ["r = np.array([0, 1, 0]).choose([[1, 2, 3], [4, 5, 6]])\n"],
    "clip": ["r = A.clip(-1, 1)\ns = A.clip(min=0)\nA.clip(-2, 2, out=A)\n"],
    "compress": ["r = v.compress([True, False, True])\ns = A.compress([0, 1, 1], axis=0)\n"],
    "conj": ["r = z.conj()\ns = A.conj()\n"],
    "conjugate": ["r = z.conjugate()\n"],
    "copy": ["r = A.copy()\nr[0, 0] = 99\ns = A.copy(order='F')\n"],
    "ctypes": ["r = A.ctypes.data != 0\n"],
    "cumprod": ["r = v.cumprod()\ns = A.cumprod(axis=1)\n"],
    "cumsum": ["r = v.cumsum()\ns = A.cumsum(axis=0, dtype=np.float32)\nA.cumsum(axis=1, out=A)\n"],
    "data": ["r = bytes(A.data)[:8]\n"],
    "device": ["r = A.device\n"],
    "diagonal": ["r = A.diagonal()\ns = A.diagonal(1)\nt = A.diagonal(offset=-1)\n"],
    "dot": ["r = A.dot(A.T)\ns = v.dot(v)\n"],
    "dtype": ["r = A.dtype\ns = A.dtype.kind\nt = str(i.dtype)\n"],
    "dump": [],                   # writes a file: not a cell-contract example
    "dumps": ["r = len(A.dumps()) > 0\n"],
    "fill": ["A.fill(2.5)\n", "v.fill(0)\nr = v + 1\n"],
    "flags": ["r = A.flags['C_CONTIGUOUS']\ns = A.T.flags.f_contiguous\n"],
    "flat": ["r = list(A.flat)[:3]\ns = A.flat[5]\nA.flat[2] = 10\n"],
    "flatten": ["r = A.flatten()\ns = A.flatten('F')\n"],
    "getfield": ["r = A.getfield(np.float64)\n"],
    "imag": ["r = z.imag\ns = A.imag\n"],
    "item": ["r = A.item(3)\ns = A.item((1, 2))\nt = v[:1].item()\n"],
    "itemsize": ["r = A.itemsize\ns = i.itemsize\n"],
    "mT": ["r = A.mT + 0\n"],
    "max": ["r = A.max()\ns = A.max(axis=0)\nt = A.max(1, keepdims=True)\nu = A.max(initial=100)\n"],
    "mean": ["r = A.mean()\ns = A.mean(axis=1)\nt = i.mean(dtype=np.float32)\n"],
    "min": ["r = A.min()\ns = A.min(axis=(0, 1))\n"],
    "nbytes": ["r = A.nbytes\n"],
    "ndim": ["r = A.ndim\n"],
    "nonzero": ["r = b.nonzero()\ns = v.nonzero()\n"],
    "partition": ["v.partition(2)\nr = v + 0\n", "A.partition(1, axis=1)\n"],
    "prod": ["r = v.prod()\ns = A.prod(axis=0)\n"],
    "put": ["v.put([0, 2], [9.0, 8.0])\n", "A.put(5, -1.0)\n"],
    "ravel": ["r = A.ravel()\ns = A.ravel('F')\n"],
    "real": ["r = z.real\ns = A.real + 0\n"],
    "repeat": ["r = v.repeat(2)\ns = A.repeat(2, axis=1)\nt = A.repeat([1, 2, 0], axis=0)\n"],
    "reshape": ["r = A.reshape(4, 3)\ns = A.reshape((2, -1))\nt = A.reshape(-1, order='F')\n"],
    "resize": ["c = A.copy()\nc.resize((2, 2), refcheck=False)\n"],
    "round": ["r = (A / 3).round(2)\ns = A.round()\n"],
    "searchsorted": ["r = np.sort(v).searchsorted(2.5)\ns = np.sort(v).searchsorted([1, 4], side='right')\n"],
    "setfield": ["c = A.copy()\nc.setfield(1.0, np.float64)\n"],
    "setflags": ["c = A.copy()\nc.setflags(write=False)\nr = c.flags.writeable\n"],
    "shape": ["r = A.shape\ns = A[:, None].shape\n"],
    "size": ["r = A.size\ns = A[0].size\n"],
    "sort": ["v.sort()\n", "A.sort(axis=0)\nr = A + 0\n", "v.sort(kind='stable')\n"],
    "squeeze": ["r = A[None].squeeze()\ns = A[:, None].squeeze(axis=1)\n"],
    "std": ["r = A.std()\ns = A.std(axis=0, ddof=1)\n"],
    "strides": ["r = A.strides\ns = A.T.strides\n"],
    "sum": ["r = A.sum()\ns = A.sum(axis=1)\nt = A.sum(0, keepdims=True)\nu = i.sum(dtype=np.int32)\n",
            "o = np.zeros(4)\nA.sum(axis=0, out=o)\n"],
    "swapaxes": ["r = A.swapaxes(0, 1)\n"],
    "take": ["r = v.take([0, 3])\ns = A.take([1, 0], axis=1)\nt = v.take(7, mode='wrap')\n"],
    "to_device": ["r = A.to_device('cpu') + 0\n"],
    "tobytes": ["r = A.tobytes()\ns = A.T.tobytes()\n"],
    "tofile": [],                 # writes a file
    "tolist": ["r = A.tolist()\ns = v[0].tolist()\n"],
    "trace": ["r = A.trace()\ns = A.trace(1)\n"],
    "transpose": ["r = A.transpose()\ns = A.transpose(1, 0)\nt = A.transpose((1, 0))\n"],
    "var": ["r = A.var()\ns = A.var(axis=1, ddof=1)\n"],
    "view": ["r = A.view()\nr[0, 0] = 50\n", "r = A.view(np.int64)\n"],
}
# __setitem__ with every kind of index
SETITEM = {
    "setitem_int": "A[1] = 7\n", "setitem_neg": "A[-1, -1] = 7\n", "setitem_slice": "A[:, 1:3] = 0\n",
    "setitem_step": "A[::2, ::-1] = 1\n", "setitem_ellipsis": "A[..., 0] = -1\n", "setitem_none": "A[None, 1] = 4\n",
    "setitem_list": "A[[0, 2]] = 3\n", "setitem_int_arrays": "A[np.array([0, 1]), np.array([3, 2])] = 8\n",
    "setitem_bool": "A[A > 0] = 0\n", "setitem_bool_rows": "A[np.array([True, False, True])] = 1\n",
    "setitem_broadcast": "A[:] = np.arange(4)\n", "setitem_aug_fancy": "A[[0, 0, 1]] += 1\n",
    "setitem_aug_mask": "A[A < 0] *= -1\n", "setitem_tuple_mix": "A[1, [0, 3]] = 5\n",
}


def cells():
    out = []
    for name, calls in CALLS.items():
        for k, src in enumerate(calls):
            out.append(Cell(f"{name}_{k}", src, setup=SETUP))
    out += [Cell(k, v, setup=SETUP) for k, v in SETITEM.items()]
    return out


def table(results) -> str:
    """Markdown: attribute -> compiled / plain (with the reason)."""
    lines = ["| ndarray attribute | in a compiled cell |", "|---|---|"]
    for name in CALLS:
        rows = [r for k, r in results.items() if k.rsplit("_", 1)[0] == name]
        if not CALLS[name]:
            lines.append(f"| `{name}` | not measured (writes a file) |")
        elif all(r is None for r in rows):
            lines.append(f"| `{name}` | same as NumPy |")
        else:
            why = next(r for r in rows if r is not None)
            why = why.split(" (", 1)[-1].rsplit("); the cell ran plainly", 1)[0]
            lines.append(f"| `{name}` | same as NumPy; {sum(r is not None for r in rows)} of {len(rows)} calls "
                         f"run the cell plainly: {why} |")
    return "\n".join(lines)


if __name__ == "__main__":      # pragma: no cover - prints the docs table
    from . import harness
    sh = harness.get_shell("numpy")
    res = {}
    for c in cells():
        res[c.name] = harness.run(sh, c, compiled=True).fallback
    print(table(res))

"""The arrays a flushed segment hands back: no two outputs one buffer, and copies into a
tensor's real buffer on any device (capture.flush)."""
import numpy as np


def _unshared(arrays):
    """The segment's outputs with no two of them one buffer. The compiler merges equal values
    (each parameter's `zeros(())` step count, made separately by the code, is one value to the
    graph) and hands the same array back for each: the tensors the code made separately must
    stay separate arrays, or an in-place update of one changes the others."""
    seen = set()
    out = list(arrays)
    for i, a in enumerate(out):
        if getattr(a, "ndim", None) is None:
            continue
        key = (_address(a), a.shape, a.strides, str(a.dtype))
        if key in seen:
            out[i] = a.copy()
        else:
            seen.add(key)
    return out


def _address(a):
    iface = getattr(a, "__array_interface__", None)
    if iface is not None:
        return iface["data"][0]
    return getattr(getattr(a, "data", None), "ptr", id(a))      # a CuPy array


def _copy_into(dst, src):
    if hasattr(dst, "__cuda_array_interface__"):
        dst[...] = src
    else:
        np.copyto(dst, src, casting="unsafe")

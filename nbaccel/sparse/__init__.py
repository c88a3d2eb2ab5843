"""nbaccel.sparse: 2:4 semi-structured sparsity, in PyTorch's spelling.

>>> import nbaccel as nb
>>> w = nb.sparse.prune_2_4(nb.randn(8, 16))          # two largest magnitudes of every four
>>> s = nb.sparse.to_sparse_semi_structured(w)         # values + 2-bit positions
>>> x = nb.randn(3, 16)
>>> bool((nb.nn.functional.linear(x, s) - x @ w.T).abs().max() < 1e-5)
True

See docs/sparsity.md. The kernels (numba on the CPU, Triton on CUDA) are in
``nbaccel_kernels.sparse``.
"""
from .semi_structured import SparseSemiStructuredTensor, to_sparse_semi_structured  # noqa: F401
from .pruning import SparseSemiStructuredLinear, apply_2_4_, prune_2_4  # noqa: F401

__all__ = ["SparseSemiStructuredTensor", "SparseSemiStructuredLinear", "to_sparse_semi_structured",
           "prune_2_4", "apply_2_4_"]

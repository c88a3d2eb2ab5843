"""GPU support: Triton launched on CuPy's device, stream and memory (``triton_driver``), the
``max-autotune`` search and its on-disk cache (``autotune``), and where a ``%%compile`` cell
runs (``placement``). Nothing here imports CuPy, Triton or PyTorch at import time; see
docs/gpu.md."""

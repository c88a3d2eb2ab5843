"""nbaccel benchmarks against NumPy eager, PyTorch eager and torch.compile.

Run ``make bench`` (or ``python -m bench.run``); see bench/README.md and docs/benchmarks.md.
"""

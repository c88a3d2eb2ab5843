"""The one error of the Dask bridge's stages: a call that cannot be chunk work.

The plan, the twin kernels, the stage source and the lowering all raise it, and ``bridge.py``
catches it and runs the call plainly on Dask with its message as the reason. It lives apart so
that each of them imports it from below (the plan imports the twins, which raise it).
"""
from __future__ import annotations


class NotChunkWork(Exception):
    """The call runs plainly on Dask; ``str(exc)`` is the reason shown to the user."""

"""The capture room: from the user's call to a graph of primitives.

``capture.py`` runs one call on tracer tensors and records a graph (``schedule/ir.py``), breaking
it where Python needs a concrete value; ``user_code.py`` says where the user is and what a break
tells them; ``decompose.py`` rewrites composite ops into the op table's primitives; ``aot.py``
derives a backward graph from the forward one (ahead-of-time autograd); ``numpy_identity.py``
gives ``np.asarray`` and its kin NumPy's meaning on a tracer while a call is traced.

May import: runtime, schedule

(``runtime`` for ``fpflags`` only: a traced op records the floating-point state that its run
is later judged by.) The layers below the compiler are open to every room (docs/architecture.md).
"""

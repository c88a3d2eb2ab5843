"""Execution: kernel slots that switch tiers, and programs (the background numba compiler is
compile_thread.py).

A :class:`KernelSlot` holds one fused kernel. Its NumPy version exists at once; its numba
version compiles off the main thread (``backend="auto"``) or before the first call
(``backend="numba"``, ``mode="max-autotune"``); each call uses the best version ready then.
A :class:`Program` runs one scheduled graph (kernels, views and extern ops in order) on one
tier (:class:`CpuTier` here, ``triton_runtime.TritonTier``) and times every step, which is the
placement data the report shows.
"""
from __future__ import annotations

import concurrent.futures
import math
import threading
import time
import warnings

import numpy as np
from nbaccel_kernels import _numba_warnings

from ..cache import cache, jit_split, warmup as numba_warmup
from ..codegen import common, numba as nb_codegen, numba_launch, numpy as np_codegen
from ..schedule.loops import Kernel
from ..schedule.schedule import ExternStep, schedule
from .compile_thread import _COMPILER, _CompileThread  # noqa: F401  (runtime._COMPILER: api, tests)

_NUMBA_KERNELS: dict[str, "NumbaKernel"] = {}
_LOCK = threading.Lock()


def _quiet_numba_ir_warnings():
    """Ignore numba's internal SSA pedantry about inlined helpers (noise for users) with one
    process-wide filter. Not ``warnings.catch_warnings()``: this runs on a compile thread,
    and that context swaps the process's filters and ``showwarning`` on entry and puts back its
    own copy on exit, which dropped the warnings a notebook cell (or pytest.warns) was
    recording meanwhile and undid filters set in between."""
    # numba loads here, on the compiler's thread, not with `%load_ext` (0.2 s)
    from numba.core.errors import NumbaIRAssumptionWarning
    # looked up each time, not remembered: a catch_warnings() the user left meanwhile takes
    # the filter with it
    if not any(f[0] == "ignore" and f[2] is NumbaIRAssumptionWarning for f in warnings.filters):
        warnings.filterwarnings("ignore", category=NumbaIRAssumptionWarning)
    _numba_warnings.ignore_numba_internal_warnings()


class NumbaKernel:
    """One generated numba module, shared by every graph whose kernel has the same source."""

    def __init__(self, source: str):
        self.source = source
        self.fn = None
        self.state = "pending"      # pending | ready | failed
        self.cache = None           # 'disk' | 'new' | 'rebuilt'
        self.jit_seconds = 0.0
        self.jit_split = jit_split.empty()   # numba typing / lowering / llvm / cache save / other
        self.error = None
        self.future = None
        self.numba_compiled = False
        self._warm = None

    def warm(self) -> bool:
        """Is the machine code on disk (asked once: the kernels of a loop's unrolled steps share
        a source, and each look is a file-system call)?"""
        if self._warm is None:
            self._warm = cache.is_warm(self.source)
        return self._warm

    def compile(self, kinds):
        """Build (or load) the kernel for arguments of these kinds (:func:`argument_kinds`)."""
        t0 = time.perf_counter()
        signature = ()
        try:
            # numba's set-up, once per process and with the collector paused, on the thread
            # that compiles (the main thread's first result does not wait for it unless the
            # compile is synchronous); waits for the background warm-up when one is running
            numba_warmup.ensure()
            _quiet_numba_ir_warnings()
            signature = _signature(kinds)
            self._compile(signature)
        except Exception as e:   # a kernel numba cannot build stays on the NumPy tier
            self.error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            self.state = "failed"
        self.jit_seconds = time.perf_counter() - t0
        self.jit_split = jit_split.split(self.fn, signature, self.jit_seconds, self.numba_compiled) \
            if self.fn is not None else dict(jit_split.empty(), other=self.jit_seconds)
        return self

    def _compile(self, signature):
        path, how = cache.module_file(self.source)
        fn = cache.load_module(path).kernel
        fn.compile(signature)
        stats = getattr(fn, "stats", None)
        self.numba_compiled = not (stats and sum(stats.cache_hits.values()) > 0)
        # machine code loaded from the disk cache is 'disk' even when this process wrote the
        # module file itself (another process compiled it at the same moment)
        if self.numba_compiled:
            self.cache = "new" if how == "disk" else how
        else:
            self.cache = "disk" if how != "memory" else how
        self.fn = fn
        self.state = "ready"


def argument_kinds(arrays) -> tuple:
    """What numba's type of each kernel argument depends on (an array's dtype, dimensions,
    layout and writability; any other value itself), taken on the caller's thread without numba:
    a process's first compiled call asks while the warm-up thread imports numba, and
    ``numba.typeof`` there waited for that import (0.38 s of a warm start's first call). The
    compile thread makes the types (:func:`_signature`), and the arrays are not kept alive."""
    return tuple((a.dtype, a.ndim, "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous
                  else "A", not a.flags.writeable) if type(a) is np.ndarray else a for a in arrays)


def _signature(kinds) -> tuple:
    """numba's argument types for :func:`argument_kinds`, as ``numba.typeof`` gives them for the
    arrays, then the launcher's two trailing arguments."""
    import numba
    from numba.np import numpy_support
    return tuple(numba.types.Array(numpy_support.from_dtype(k[0]), k[1], k[2], readonly=k[3])
                 if type(k) is tuple else numba.typeof(k) for k in kinds) + numba_launch.signature_tail()


def empty_reduction_error(k: Kernel):
    """NumPy's error for a reduction without identity over zero-size ranges (max, min and
    their indices; the op table declares it), or None."""
    return next((err for err in (r.rule.empty(k.domain, k.axes) for r in k.reductions) if err), None)


class KernelSlot:
    """A fused kernel with a NumPy version and, when numba can build it, a numba version."""

    def __init__(self, k: Kernel, name: str, want_numba: bool, dynamic: bool, sync: bool):
        self.k = k
        self.name = name
        self.np_source, params = np_codegen.render_kernel(k, name)
        ns = np_codegen.namespace()
        ns["P"] = params
        exec(compile(self.np_source, f"<nbaccel {name}>", "exec"), ns)   # noqa: S102 - our own code
        self.np_fn = ns[name]
        self.why_not_numba = nb_codegen.unsupported_reason(k) if want_numba else "backend is numpy"
        self.numba = None
        self.want_numba = want_numba and self.why_not_numba is None
        self.sync = sync
        self.seconds = 0.0
        self.backend = "numpy"
        self.nonfinite = False            # a numba run stored an inf or a NaN since last asked
        self.empty_error = empty_reduction_error(k)
        if self.want_numba:
            self.parallel = math.prod(k.domain) >= nb_codegen.PARALLEL_MIN_ELEMS   # (per shape: dynamic entries too)
            src, params = nb_codegen.render_kernel(k, "kernel", self.parallel)
            self.P = np.array(params, dtype=np.int64)
            h = cache.source_hash(src)
            with _LOCK:
                self.numba = _NUMBA_KERNELS.get(h)
                if self.numba is None:
                    self.numba = _NUMBA_KERNELS[h] = NumbaKernel(src)
            self.warm = self.numba.warm()
            if not sync and self.numba.state == "pending" and self.warm and numba_warmup.ready():
                self.sync = True    # machine code is on disk and numba is set up: milliseconds

    @property
    def source(self):
        return self.numba.source if self.numba is not None else self.np_source

    def note(self):
        """Why the kernel runs on NumPy (the report's note), or ''."""
        return self.why_not_numba or (self.numba.error if self.numba and self.numba.error else "")

    def start(self, arrays):
        """Begin (or finish, when synchronous) the numba compile for these argument types."""
        nk = self.numba
        if nk is None or nk.state != "pending":
            return
        with _LOCK:
            if nk.future is None:
                sig = argument_kinds(arrays + (self.P,))
                if self.sync:
                    nk.future = concurrent.futures.Future()
                    nk.compile(sig)
                    nk.future.set_result(nk)
                else:
                    # a load from disk fills no cache: an exiting process does not wait for it
                    nk.future = _COMPILER.submit(nk.compile, sig, _fills_cache=not self.warm)
        if self.sync:
            nk.future.result()

    def __call__(self, *arrays):
        t0 = time.perf_counter()
        if self.empty_error is not None:
            raise ValueError(self.empty_error)
        nk = self.numba
        if nk is not None and nk.state == "pending":
            self.start(arrays)
        if nk is not None and nk.state == "ready" and self._numba_took(nk, arrays):
            self.backend = "numba"
            if self.P[-1]:                # the kernel stored an inf or a NaN (codegen/numba.py)
                self.P[-1] = 0
                self.nonfinite = True
        else:
            self.np_fn(*arrays)
            self.backend = "numpy"
        self.seconds = time.perf_counter() - t0

    def _numba_took(self, nk, arrays) -> bool:
        """Run the numba version; False where numba refused these arguments. A numba kernel
        raises nothing once it runs (error_model='numpy', no bounds checks): an exception is its
        dispatcher's (a layout or a read-only array its signature has no machine code for, and
        cannot compile), raised before any element was written, so the slot's NumPy version
        can run the call instead, and runs its later calls too (the report's note says why). A
        replayed training step whose kernels write parameters in place relies on it: once a
        parameter's buffer is handed out, a fault cannot be run again (replay.run_program)."""
        try:
            numba_launch.launch(nk.fn, arrays, self.P, self.parallel)
            return True
        except Exception as e:    # noqa: BLE001 - told apart below
            if not isinstance(e, TypeError) and not type(e).__module__.startswith("numba"):
                raise
            first = str(e).splitlines()[0] if str(e) else ""
            self.numba = None
            self.why_not_numba = f"numba refused the arguments at run time ({type(e).__name__}: {first})"
            return False


class CpuTier:
    """The CPU tiers of a :class:`Program`: every kernel has its NumPy version at once and,
    where numba can build it, a numba version compiled off the main thread (``auto``) or
    before the first call (``numba``, ``max-autotune``)."""

    device = "cpu"

    def __init__(self, backend: str, mode: str):
        self.label = backend
        self.want_numba = backend in ("auto", "numba")
        self.sync = backend == "numba" or mode == "max-autotune"

    def slot(self, k: Kernel, name: str, dynamic: bool):
        return KernelSlot(k, name, self.want_numba, dynamic, self.sync)

    def on_inputs(self, arrays, pool):
        """The arrays the program runs on, and what turns its results back (None: as they are)."""
        return arrays, None

    def load_seconds(self, slots):
        return 0.0

    def name(self, slots):
        if not slots:
            return "numpy"
        states = [s.numba.state if s.numba is not None else "none" for s in slots.values()]
        return "numba" if all(st == "ready" for st in states) else "numpy"

    def wait(self, slots, timeout):
        for slot in slots.values():
            nk = slot.numba
            if nk is not None and nk.future is not None:
                nk.future.result(timeout)

    def pending(self, slots):
        return any(s.numba is not None and s.numba.state == "pending" for s in slots.values())

    def jit_total(self, slots, jit_seconds):
        return sum(s.numba.jit_seconds for s in slots.values() if s.numba is not None)

    def jit_split(self, slots):
        return jit_split.total(s.numba.jit_split for s in slots.values() if s.numba is not None)

    def cache_state(self, slots):
        nks = [s.numba for s in slots.values() if s.numba is not None and s.numba.state == "ready"]
        if nks and all(nk.cache == "disk" for nk in nks):
            return "disk"
        return None

    def report_device(self, device):
        return device


class Program:
    """One scheduled graph, ready to run on concrete arrays of one shape signature, on one
    tier: ``tier`` supplies the kernel slots, the report label, how inputs reach the device and
    the compile state (:class:`CpuTier`; ``triton_runtime.TritonTier``). The graph program's
    buffers, views and extern calls are the same code on every tier (``codegen/common.py``)."""

    def __init__(self, graph, backend: str, mode: str, dynamic: bool, tier=None):
        t0 = time.perf_counter()
        self.target = tier if tier is not None else CpuTier(backend, mode)
        self.graph = graph
        self.schedule = schedule(graph)
        self.slots = {}
        kernels = {}
        for s in self.schedule.steps:
            if isinstance(s, Kernel):
                name = f"k{s.index}"
                self.slots[s.index] = kernels[name] = self.target.slot(s, name, dynamic)
        self.source = common.render_program(self.schedule, {i: f"k{i}" for i in self.slots}, self.target.label)
        self.pool = common.BufferPool()
        ns = common.program_namespace(self.schedule, kernels, self.pool)
        ns["extern"] = self._timed_extern(ns["extern"])
        exec(compile(self.source, "<nbaccel program>", "exec"), ns)   # noqa: S102 - our own code
        self.run_fn = ns["run"]
        self.extern_seconds: dict[int, float] = {}
        self.jit_seconds = self.target.load_seconds(self.slots)
        self.codegen_seconds = time.perf_counter() - t0 - self.jit_seconds
        self.last_seconds = 0.0
        self.device = self.target.device

    def _timed_extern(self, extern):
        def timed(index, *arrays):
            t0 = time.perf_counter()
            out = extern(index, *arrays)
            self.extern_seconds[index] = time.perf_counter() - t0
            return out
        return timed

    def run(self, arrays):
        arrays, back = self.target.on_inputs(arrays, self.pool)
        t0 = time.perf_counter()
        out = self.run_fn(arrays)
        self.last_seconds = time.perf_counter() - t0
        return out if back is None else back(out)

    def wait(self, timeout=None):
        """Block until every kernel of this program has finished compiling."""
        self.target.wait(self.slots, timeout)

    def stored_nonfinite(self):
        """Whether a numba kernel stored an inf or a NaN since the last call (and forget it);
        None when a kernel ran where no flag is kept (a slot of another tier). NumPy-tier
        kernels and extern calls report through NumPy's own flags instead (fpflags.py)."""
        seen = False
        for slot in self.slots.values():
            flag = getattr(slot, "nonfinite", None)
            if flag is None:
                return None
            if flag:
                slot.nonfinite = False
                seen = True
        return seen

    def tier(self):
        return self.target.name(self.slots)

    def pending(self):
        return self.target.pending(self.slots)

    def jit_total(self):
        return self.target.jit_total(self.slots, self.jit_seconds)

    def jit_split(self):
        """jit_total() divided into numba typing, lowering, LLVM, cache save and other."""
        return self.target.jit_split(self.slots)

    def cache_state(self):
        """'disk' when every numba kernel came from the disk cache without compiling."""
        return self.target.cache_state(self.slots)

    def kernels(self, device="cpu"):
        device = self.target.report_device(device)
        out = []
        static = self.__dict__.setdefault("_kernel_text", {})   # (built once: every call reports)
        for s in self.schedule.steps:
            if isinstance(s, Kernel):
                slot = self.slots[s.index]
                if s.index not in static:
                    static[s.index] = (s.op_names(), s.ranges_text())
                ops, ranges = static[s.index]
                out.append({"name": s.name, "ops": list(ops), "ranges": ranges, "device": device,
                            "backend": slot.backend, "seconds": slot.seconds, "note": slot.note()})
            elif isinstance(s, ExternStep):
                op = s.node.op
                backend = op.extern_backend(s.node.params) if op.extern_backend else \
                    "blas" if op.name == "matmul" else "numpy"
                out.append({"name": s.name, "ops": [s.node.op.name], "device": device, "backend": backend,
                            "seconds": self.extern_seconds.get(s.node.index, 0.0)})
        return out

    def code(self):
        parts = [self.source]
        for slot in self.slots.values():
            parts.append(slot.source)
        return "\n\n".join(parts)


class KernelFreeProgram:
    """A program that compiles no kernels (the eager fallback, the cheap path): nothing to wait
    for, no JIT time, no disk cache."""

    def wait(self, timeout=None):
        pass

    def pending(self):
        return False

    def jit_total(self):
        return 0.0

    def cache_state(self):
        return None


class EagerProgram(KernelFreeProgram):
    """What runs a graph when compiling it failed: the reference interpreter, op by op. The
    report shows "compiler error → ran eagerly" with the exception (an internal error never
    reaches the user; ``nb.config["strict"]`` raises it instead)."""

    def __init__(self, graph, error: str, stage: str):
        self.graph = graph
        self.error = f"{stage}: {error}"
        self.schedule = type("NoSchedule", (), {"refused": [], "steps": []})()
        self.codegen_seconds = 0.0
        self.lowering_seconds = 0.0
        self.last_seconds = 0.0

    def run(self, arrays):
        t0 = time.perf_counter()
        out = interpret(self.graph, arrays)
        self.last_seconds = time.perf_counter() - t0
        return out

    def kernels(self, device="cpu"):
        return [{"name": "eager", "ops": [n.op.name for n in self.graph.nodes], "device": device,
                 "backend": "eager", "seconds": self.last_seconds,
                 "note": f"compiler error → ran eagerly ({self.error})"}]

    def code(self):
        return f"# compiler error → ran eagerly\n# {self.error}\n"

    def tier(self):
        return "eager"


def interpret(graph, arrays, timer=None):
    """The reference interpreter: run a graph op by op with each op's eager implementation."""
    xp = common.inputs_array_module(arrays)     # CuPy for CUDA inputs: the report's eager baseline
    env = {}
    for p, a in zip(graph.placeholders, arrays):
        env[id(p)] = a
    for n in graph.nodes:
        args = [env[id(a)] if hasattr(a, "op") and hasattr(a, "index") else a for a in n.args]
        out = xp.asarray(n.op.impl(xp, *args, **n.params))
        if out.dtype != n.dtype.np:
            out = out.astype(n.dtype.np)
        env[id(n)] = out
    return [env[id(o)] for o in graph.outputs]

"""``DataParallel``: a replica of the model on every Dask worker, one global step at a time.

>>> dp = nb.distributed.DataParallel(model, opt, client=client)        # doctest: +SKIP
>>> loss = dp.step(F.mse_loss, X, Y)        # the batch split over the workers  # doctest: +SKIP

A step scatters the worker's rows of the batch to each replica (a Dask actor pinned to its
worker), which runs the compiled forward + backward; the driver averages the flat gradients
(weighted by shard size, so a mean loss gives exactly the single-process gradient) and sends
the same average to every replica, which applies the optimizer. Nothing runs on a runtime of
our own: Dask moves the arrays, nbaccel computes.
"""
from __future__ import annotations

import os
import time
import warnings

import numpy as np

from .sharded import _chunk_bounds
from .replica import Replica, ReplicaReplacedError
from ..autograd import no_grad
from ..convert import asarray


class WorkerLostError(RuntimeError):
    """A worker holding a replica died: training stopped (or resumed, with ``resume=True``)."""


class _GoneError(OSError):
    """A replica's worker left the scheduler while the driver waited for its answer."""


_POLL_S = 2.0


class _RemoteTensor:
    """A tensor of the replicas' state, written into a checkpoint by the workers: worker ``i``
    writes row block ``i`` (``checkpoint.save`` calls ``writer.write_shards``)."""

    def __init__(self, writer, path, shape, dtype_name, boxes):
        self.writer, self.path, self.shape, self.dtype_name, self.boxes = writer, path, shape, dtype_name, boxes

    def __nbaccel_checkpoint__(self):
        return self

    def __repr__(self):
        return f"RemoteTensor(shape={self.shape}, dtype={self.dtype_name}, on {len(self.boxes)} workers)"


class DataParallel:
    """``DataParallel(model, optimizer, client=client, workers=None, compile_mode="default",
    resume=False)``: one replica of ``model`` and ``optimizer`` on each worker of ``client``
    (or on ``workers``, a list of addresses).

    * ``step(loss_fn, inputs, targets)`` runs one global step and returns the mean loss.
    * ``replicas_identical()`` compares every replica's parameters bit for bit.
    * ``module`` is the driver's ``model`` holding the trained parameters.
    * ``state_dict()`` is ``{"model": ..., "optim": ...}`` for ``checkpoint.save``; the workers
      write it. With ``resume=True`` a lost worker makes the next step rebuild the replicas on
      the workers that are up, from the last checkpoint saved through this object, and redo
      the step (with a warning, also kept in ``resumed``); otherwise it raises
      :class:`WorkerLostError`.
    * ``report()``: steps per second, time computing against communicating, the workers.
    """

    def __init__(self, model, optimizer, client=None, workers=None, compile_mode: str | None = "default",
                 resume: bool = False):
        from distributed import get_client
        self.client = client if client is not None else get_client()
        self._model, self._optimizer = model, optimizer
        self.compile_mode = compile_mode
        self.resume = resume
        self._requested = list(workers) if workers is not None else None
        self._last_checkpoint = None
        self._loss_fn = None
        self._broken = None
        self.steps = 0
        self.resumed = []             # one message per resumption (each also a RuntimeWarning)
        self._times = []              # (wall, max compute) per step
        self._start_replicas(self._workers_now())

    # -- replicas ---------------------------------------------------------------------------------
    def _workers_now(self):
        workers = sorted(self.client.scheduler_info(n_workers=-1)["workers"]) if self._requested is None \
            else self._requested
        if not workers:
            raise RuntimeError("DataParallel: the client has no workers")
        return workers

    def _start_replicas(self, workers, checkpoint_id=None):
        self.workers = list(workers)
        futures = [self.client.submit(Replica, (self._model, self._optimizer), self.compile_mode,
                                      actor=True, workers=[w], allow_other_workers=False, pure=False)
                   for w in self.workers]
        self._futures = futures          # keep the actors alive
        self.replicas = [f.result() for f in futures]
        self._identities = [r.whoami().result() for r in self.replicas]
        self._loss_fn = None
        if checkpoint_id is not None:
            self._all("load_checkpoint", checkpoint_id)

    def _all(self, method, *args, each=None):
        """``method(*args)`` (or ``method(*each[i])`` on replica ``i``) on every replica at once;
        their results, or WorkerLostError as soon as a replica's worker is gone."""
        try:
            pending = [r.call(ident, method, *(each[i] if each is not None else args))
                       for i, (r, ident) in enumerate(zip(self.replicas, self._identities))]
            return [self._wait(p) for p in pending]
        except Exception as e:            # a dead worker surfaces as a comm or actor error
            lost = self._lost_workers()
            if not lost and not _is_comm_error(e) and not isinstance(e, ReplicaReplacedError):
                raise
            self._broken = (lost or self.workers, e)
            raise WorkerLostError(
                f"DataParallel: worker {', '.join(lost) or '(unknown)'} holding a replica was lost at "
                f"step {self.steps + 1} ({type(e).__name__}: {e}). The replicas can no longer stay "
                "identical, so training stopped; pass resume=True (and save checkpoints with "
                "checkpoint.save(dp.state_dict(), ...)) to restart from the last checkpoint") from e

    def _lost_workers(self):
        alive = set(self.client.scheduler_info(n_workers=-1)["workers"])
        return [w for w in self.workers if w not in alive]

    def _wait(self, pending):
        # Dask retries a call whose worker vanished by waiting for the actor's task, which for
        # a lost actor may never finish: the driver asks the scheduler itself between short waits
        while True:
            try:
                return pending.result(timeout=_POLL_S)
            except TimeoutError:
                lost = self._lost_workers()
                if lost:
                    raise _GoneError(f"the scheduler no longer lists {', '.join(lost)}") from None

    def _recover(self):
        lost, err = self._broken
        if not self.resume or self._last_checkpoint is None:
            why = "resume=False" if not self.resume else "no checkpoint was saved from this DataParallel"
            raise WorkerLostError(f"DataParallel: stopped after worker {', '.join(lost)} was lost "
                                  f"({why}); build a new DataParallel") from err
        deadline = time.monotonic() + 60
        while True:                       # a nanny restarts a killed worker under a new address
            workers = self._workers_now() if self._requested is None else \
                [w for w in self._requested if w in self.client.scheduler_info(n_workers=-1)["workers"]]
            if len(workers) >= len(self.workers) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        path, step = self._last_checkpoint
        message = (f"DataParallel: worker {', '.join(lost)} was lost; resumed on {len(workers)} "
                   f"workers from the checkpoint of step {step} ({path}); steps after it are redone")
        self.resumed.append(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        self._broken = None
        self._start_replicas(workers, checkpoint_id=path)
        self.steps = step

    # -- training ---------------------------------------------------------------------------------
    def step(self, loss_fn, inputs, targets) -> float:
        """One global step: each worker's rows of ``inputs`` / ``targets`` through
        ``loss_fn(model(rows), targets_rows)`` and backward; gradients averaged over the
        workers; the same optimizer update on every replica. Returns the mean loss."""
        if self._broken is not None:
            self._recover()
        try:
            return self._step(loss_fn, inputs, targets)
        except WorkerLostError:
            if not self.resume:
                raise
        self._recover()                   # resume=True: from the last checkpoint, then redo
        return self._step(loss_fn, inputs, targets)

    def _step(self, loss_fn, inputs, targets):
        x, y = np.asarray(inputs), np.asarray(targets)
        if len(x) != len(y):
            raise ValueError(f"DataParallel.step: {len(x)} inputs but {len(y)} targets")
        if len(x) < len(self.replicas):
            raise ValueError(f"DataParallel.step: a batch of {len(x)} cannot be split over "
                             f"{len(self.replicas)} workers")
        t0 = time.perf_counter()
        if loss_fn is not self._loss_fn:
            self._all("set_loss_fn", loss_fn)
            self._loss_fn = loss_fn
        bounds = _even_bounds(len(x), len(self.replicas))
        weights = np.array([(hi - lo) / len(x) for lo, hi in bounds])
        out = self._all("grads", each=[(x[lo:hi], y[lo:hi]) for lo, hi in bounds])
        losses, grads, compute = zip(*out)
        avg = grads[0] * weights[0]
        for g, w in zip(grads[1:], weights[1:]):
            avg = avg + g * w
        avg = avg.astype(grads[0].dtype, copy=False)
        applied = self._all("apply", avg)
        wall = time.perf_counter() - t0
        self._times.append((wall, max(c + a for c, a in zip(compute, applied)), len(x)))
        self.steps += 1
        return float(np.dot(weights, losses))

    def replicas_identical(self) -> bool:
        """True when every replica's parameters are bit-identical."""
        prints = self._all("fingerprint")
        return len({p for p, _ in prints}) == 1

    @property
    def module(self):
        """The driver's model with the replicas' (identical) trained parameters copied in."""
        params = self._all("parameters")[0]
        with no_grad():
            for k, v in self._model.state_dict().items():
                if k in params:
                    v.copy_(asarray(params[k]))
        return self._model

    # -- checkpoints ------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"model": ..., "optim": ...}`` whose tensors are written by the workers when passed
        to ``checkpoint.save``: each worker writes its block of rows of every tensor."""
        skeleton = self._all("skeleton")[0]
        n = len(self.replicas)
        tree: dict = {}
        for path, shape, value in skeleton:
            if shape is not None:
                shape = tuple(shape)
                rows = _chunk_bounds(shape[0], n) if shape and shape[0] else None
                boxes = [((lo,) + (0,) * (len(shape) - 1), (hi - lo,) + shape[1:]) for lo, hi in rows] \
                    if rows else [((0,) * len(shape), shape)]
                value = _RemoteTensor(self, path, shape, value, boxes)
            d = tree
            for part in path[:-1]:
                d = d.setdefault(part, {})
            d[path[-1]] = value
        self._pending_step = self.steps
        return tree

    def write_shards(self, data_dir, items):
        """Called by ``checkpoint.save``: worker ``i`` writes box ``i`` of every tensor."""
        per_worker = [[] for _ in self.replicas]
        for array_path, remote in items:
            for i, (off, size) in enumerate(remote.boxes):
                per_worker[i].append((array_path, remote.path, off, size))
        self._all("write_shards", each=[(data_dir, jobs) for jobs in per_worker])

    def checkpoint_published(self, root):
        """Called by ``checkpoint.save`` once the manifest is published: resume from here."""
        self._last_checkpoint = (os.fspath(root), getattr(self, "_pending_step", self.steps))

    # -- report -------------------------------------------------------------------------------------
    def report(self) -> dict:
        """Steps per second and the share of a step spent communicating (the wall time not
        spent computing on the slowest worker), over the steps so far (the first excluded: it
        compiles)."""
        times = self._times[1:] or self._times
        wall = sum(t for t, _, _ in times)
        compute = sum(c for _, c, _ in times)
        samples = sum(s for _, _, s in times)
        compiled = self._all("compile_stats") if self.replicas else []
        return TrainingReport(
            {"workers": list(self.workers), "steps": self.steps, "resumed": list(self.resumed),
             "compiled_step": compiled,
             "steps_per_s": len(times) / wall if wall else 0.0,
             "samples_per_s": samples / wall if wall else 0.0,
             "compute_s": compute, "communication_s": max(wall - compute, 0.0),
             "communication_share": max(wall - compute, 0.0) / wall if wall else 0.0})

    def __repr__(self):
        r = self.report()
        return (f"DataParallel({len(self.workers)} workers, {r['steps']} steps, "
                f"{r['steps_per_s']:.1f} steps/s, communication {100 * r['communication_share']:.0f}% "
                "of a step)")


def _num(x, unit=""):
    """A measurement as a reader wants it: three significant digits, thousands grouped."""
    if x >= 1000:
        return f"{x:,.0f}{unit}"
    return f"{x:.3g}{unit}"


class TrainingReport(dict):
    """:meth:`DataParallel.report`: a dict (its keys are the API) that prints as a short summary
    (``repr``) and as a table in a notebook (``_repr_html_``), never as a raw dict of
    15-digit floats."""

    def _rows(self):
        rows = [("workers", f"{len(self['workers'])}: {', '.join(self['workers'])}"),
                ("steps", f"{self['steps']}" + (f" (resumed at {', '.join(map(str, self['resumed']))})"
                                                if self["resumed"] else "")),
                ("throughput", f"{_num(self['steps_per_s'])} steps/s, {_num(self['samples_per_s'])} samples/s"),
                ("time", f"compute {_num(self['compute_s'], ' s')}, communication "
                         f"{_num(self['communication_s'], ' s')} ({100 * self['communication_share']:.0f}% "
                         "of a step)")]
        stats = [c for c in self["compiled_step"] or [] if c]
        if stats:
            total = {k: sum(c.get(k, 0) for c in stats) for k in ("compiles", "cache_hits", "eager_fallbacks")}
            rows.append(("compiled step", f"{total['compiles']} compile(s), {total['cache_hits']} cache hits, "
                                          f"{total['eager_fallbacks']} eager fallbacks over {len(stats)} workers"))
        elif self["compiled_step"] is not None and self["steps"]:
            rows.append(("compiled step", "none: the step runs eagerly"))
        return rows

    def __repr__(self):
        return "DataParallel report\n" + "\n".join(f"  {k + ':':<15}{v}" for k, v in self._rows())

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))

    def _repr_html_(self):
        import html
        cells = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                        f"<td style='text-align:left'>{html.escape(v)}</td></tr>" for k, v in self._rows())
        return f"<table><caption style='text-align:left'>DataParallel report</caption>{cells}</table>"


def _even_bounds(n, k):
    """k contiguous row ranges of sizes differing by at most one."""
    base, extra = divmod(n, k)
    out, lo = [], 0
    for i in range(k):
        hi = lo + base + (i < extra)
        out.append((lo, hi))
        lo = hi
    return out


def _is_comm_error(e) -> bool:
    from distributed.comm.core import CommClosedError
    text = f"{type(e).__name__}: {e}"
    return isinstance(e, (CommClosedError, OSError)) or "lost" in text.lower() or "closed" in text.lower()

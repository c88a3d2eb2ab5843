"""``Replica``: one copy of the model and its optimizer, living on a Dask worker as an actor.

Each step has two halves so that the gradients can be averaged between them: ``grads`` runs
the compiled forward + backward on this worker's shard of the batch and hands back the loss and
the gradients as one flat array; ``apply`` writes the averaged gradients into ``p.grad`` and
runs the optimizer. Every replica receives the same averaged bytes and runs the same update,
so the replicas stay bit-identical.
"""
from __future__ import annotations

import hashlib
import time
import uuid

import numpy as np

from .checkpoint.flatten import walk
from .checkpoint import store
from . import checkpoint
from ..compiler.api import compile as nb_compile
from ..convert import asarray
from ..tensor import Tensor


class ReplicaReplacedError(LookupError):
    """The actor answering is not the replica the driver created (Dask re-ran its constructor)."""


class Replica:
    def __init__(self, payload, compile_mode):
        self.model, self.optimizer = payload
        self.params = [p for g in self.optimizer.param_groups for p in dict.__getitem__(g, "params")]
        self.compile_mode = compile_mode
        self.loss_fn = None
        self._step = None
        # made here, not passed in: if Dask ever re-ran this constructor on another worker (a
        # lost actor recomputed), the new replica would hold fresh weights under the old handle;
        # its identity differs, so the driver's next call is refused instead of silently served
        self.identity = uuid.uuid4().hex

    def call(self, identity, method, *args):
        """``method(*args)`` if this is still the replica the driver created, else an error."""
        if identity != self.identity:
            raise ReplicaReplacedError(f"this replica was re-created on its worker (lost {identity[:8]}); "
                              "its state is not the training state")
        return getattr(self, method)(*args)

    def whoami(self):
        return self.identity

    def set_loss_fn(self, loss_fn):
        self.loss_fn = loss_fn
        model, opt = self.model, self.optimizer

        params = self.params

        def forward_backward(inputs, targets):
            loss = loss_fn(model(inputs), targets)
            opt.zero_grad()
            loss.backward()
            # the gradients are outputs of the compiled graph, not only its side effects on
            # p.grad (a replayed graph did not write a p.grad that was None before the call)
            return (loss,) + tuple(p.grad for p in params)
        self._step = forward_backward if self.compile_mode is None else \
            nb_compile(forward_backward, mode=self.compile_mode)
        return True

    def grads(self, inputs, targets):
        """(loss, flat float gradients, seconds computing) for this worker's shard."""
        t0 = time.perf_counter()
        for p in self.params:
            # the averaged gradient that ``apply`` left in p.grad is spent: the step starts from
            # no gradient, as the traced step did (a compiled step given a stale grad adds to it)
            p.grad = None
        loss, *grads = self._step(asarray(inputs), asarray(targets))
        flat = np.concatenate([np.zeros(p.shape, p.dtype.np).ravel() if g is None
                               else np.asarray(g.numpy(force=True)).ravel() for p, g in zip(self.params, grads)]) \
            if self.params else np.zeros(0, np.float32)
        return float(loss), flat, time.perf_counter() - t0

    def apply(self, flat):
        """Use ``flat`` (the averaged gradients) as every parameter's grad; step the optimizer."""
        t0 = time.perf_counter()
        at = 0
        for p in self.params:
            n = int(np.prod(p.shape))
            p.grad = asarray(np.ascontiguousarray(flat[at:at + n].reshape(p.shape)).astype(p.dtype.np, copy=False))
            at += n
        self.optimizer.step()
        return time.perf_counter() - t0

    def compile_stats(self):
        """The compiled step's counters (calls, compiles, cache hits, replays, eager fallbacks,
        graph breaks), or None when it runs eagerly."""
        stats = getattr(self._step, "stats", None)
        return dict(stats) if stats is not None else None

    # -- state ------------------------------------------------------------------------------------
    def state(self):
        return {"model": self.model.state_dict(), "optim": self.optimizer.state_dict()}

    def fingerprint(self):
        """A hash of every parameter's bytes (and the optimizer state's tensors)."""
        h = hashlib.sha256()
        for p in self.params:
            h.update(np.ascontiguousarray(p.detach().numpy(force=True)).tobytes())
        params = h.hexdigest()
        for st in self.optimizer.state.values():
            for k in sorted(st):
                v = st[k]
                if isinstance(v, Tensor):
                    h.update(np.ascontiguousarray(v.numpy(force=True)).tobytes())
        return params, h.hexdigest()

    def parameters(self):
        """The model's state_dict as NumPy arrays (what ``DataParallel.module`` copies back)."""
        return {k: np.asarray(v.detach().numpy(force=True)) for k, v in self.model.state_dict().items()
                if isinstance(v, Tensor)}

    def skeleton(self):
        """The nested state_dict with every tensor replaced by (shape, dtype name)."""
        tree = self.state()
        out = []
        for path, _, _, value in walk(tree):
            if isinstance(value, Tensor):
                out.append((path, tuple(value.shape), value.dtype.name))
            else:
                out.append((path, None, value))
        return out

    def write_shards(self, data_dir, items):
        """Write this worker's share of the checkpoint: ``(array path, key path, offsets,
        sizes)`` for each region it was given."""
        tree = self.state()
        for array_path, path, offsets, sizes in items:
            t = tree
            for part in path:
                t = t[part]
            data = np.asarray(t.detach().numpy(force=True))
            region = tuple(slice(o, o + n) for o, n in zip(offsets, sizes))
            store.write_region(data_dir, array_path, offsets, data[region] if region else data)
        return len(items)

    def load_checkpoint(self, checkpoint_id):
        """Load model and optimizer state from a checkpoint (each worker reads it itself)."""
        sd = {"model": self.model.state_dict(), "optim": self.optimizer.state_dict()}
        checkpoint.load(sd, checkpoint_id=checkpoint_id)
        self.model.load_state_dict(sd["model"])
        self.optimizer.load_state_dict(sd["optim"])
        return True

    def pid(self):
        import os
        return os.getpid()

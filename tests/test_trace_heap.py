"""The garbage collector while a call is traced (compiler/capture/heap.py): the objects that
existed before the trace sit in the permanent generation, so a full collection during the trace
walks only what the trace made (notebook 07's cell that unrolls 512 grad calls spent a quarter
of its trace in full collections over the notebook's heap); afterwards they are back."""
import gc
import weakref

import numpy as np
import pytest

import nbaccel as nb


def _traced(seen, fail=False):
    @nb.compile
    def f(x):
        seen.append(gc.get_freeze_count())
        if fail:
            raise ValueError("the user's error")
        return (x * 2).sum()
    return f


def test_the_heap_is_frozen_during_a_trace_and_thawed_after():
    assert gc.get_freeze_count() == 0
    seen = []
    _traced(seen)(nb.ones(8))
    assert seen and seen[0] > 0                 # the objects from before the trace
    assert gc.get_freeze_count() == 0


def test_a_failed_trace_thaws_too():
    seen = []
    with pytest.raises(ValueError, match="the user's error"):
        _traced(seen, fail=True)(nb.ones(8))
    assert seen[0] > 0 and gc.get_freeze_count() == 0, seen


def test_a_process_that_froze_objects_itself_keeps_them_frozen():
    gc.freeze()
    try:
        mine = gc.get_freeze_count()
        seen = []
        _traced(seen)(nb.ones(8))
        # (frozen objects freed meanwhile leave the count: it only goes down)
        assert 0 < seen[0] <= mine and 0 < gc.get_freeze_count() <= mine
    finally:
        gc.unfreeze()


def test_garbage_made_during_the_trace_is_still_collected():
    class Node:
        pass
    refs = []

    @nb.compile
    def f(x):
        a, b = Node(), Node()
        a.other, b.other = b, a                  # a cycle only the collector frees
        refs.append(weakref.ref(a))
        del a, b
        gc.collect()
        refs.append(refs[0]() is None)
        return x + 1
    f(nb.tensor(np.arange(3.0)))
    assert refs[1] is True

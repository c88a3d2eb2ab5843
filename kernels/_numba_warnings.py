"""numba compiles on background threads without touching the warnings module's state.

numba's type inference wraps every typing constraint in ``warnings.catch_warnings(record=True)``
(``numba.core.errors.WarningsFixer.catch_warnings``). That context is process-wide: on entry it
swaps in a copy of the filters and a ``showwarning`` that appends to its own list, and on exit
it puts back what it found. Run on a thread beside the notebook's, it raced the notebook: a
warning the user's cell issued meanwhile went into numba's list instead of the cell's output
(or the recording of ``--verify`` or ``pytest.warns``), and numba's exit could put back a state
the notebook had already left.

:func:`quiet_this_thread` marks the calling thread, one that only compiles or loads kernels
(nbaccel's compile thread, the numba set-up, the eager kernels' loads). On a marked thread
numba's ``WarningsFixer`` enters nothing, so nothing there swaps the process's state; a numba
warning raised there meets one process-wide filter that ignores NumbaWarnings issued from
inside numba's own modules (about nbaccel's generated or hand-written kernels, never the
user's code). Other threads keep numba's own behaviour: a user's own ``numba.njit`` on the main
thread warns at their line as before (numba re-issues those at the user's file, which the
filter does not match).
"""
from __future__ import annotations

import contextlib
import threading
import warnings

_marked = threading.local()
_lock = threading.Lock()
_patched = False


def quiet_this_thread() -> None:
    """From now on numba compiles on this thread leave the warnings state alone (without
    numba there is nothing to do)."""
    _marked.quiet = True
    try:
        _patch()
    except ImportError:
        return
    ignore_numba_internal_warnings()


def ignore_numba_internal_warnings() -> None:
    """The one process-wide filter for NumbaWarnings raised inside numba's modules. Checked
    each time, not remembered: a ``catch_warnings()`` the user leaves takes it with it."""
    from numba.core.errors import NumbaWarning
    for action, _msg, category, module, _line in warnings.filters:
        if action == "ignore" and category is NumbaWarning and module is not None \
                and module.pattern == r"numba\.":
            return
    warnings.filterwarnings("ignore", category=NumbaWarning, module=r"numba\.")


def _patch() -> None:
    global _patched
    if _patched:
        return
    with _lock:
        if _patched:
            return
        from numba.core import errors
        numbas_own = errors.WarningsFixer.catch_warnings

        @contextlib.contextmanager
        def catch_warnings(self, filename=None, lineno=None):
            if getattr(_marked, "quiet", False):
                yield                     # a marked thread: nothing swapped, nothing recorded
                return
            with numbas_own(self, filename, lineno):
                yield

        errors.WarningsFixer.catch_warnings = catch_warnings
        _patched = True

"""What the magic keeps per compiled version of a cell: a :class:`CellEntry` (source + options
+ input kinds), whose CompiledFunction is built on first use (:class:`Deferred`)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CellEntry:
    """One compiled version of one cell (source + options + input kinds)."""
    key: str
    cf: object
    traced: list
    boxed: list
    outputs: set
    dels: set
    quiet: bool
    filename: str
    name: str = ""
    calls: int = 0
    reports: list = field(default_factory=list)
    shared: set = field(default_factory=set)       # declared global in the cell function
    src: str = ""
    fname: str = ""
    qualprefix: str = ""
    plain_reason: str | None = None                # set: the cell runs plainly (see _run_plain)
    probe: tuple | None = None                     # (seconds, breaks, line): compare with plain
    local_of: dict = field(default_factory=dict)   # input -> its name in the cell function
    last_report: object = None                     # the report of the last compiled run
    maybe: list = field(default_factory=list)      # outputs that start as the namespace's value
    reads: frozenset = frozenset()                 # names the cell reads before it binds them
    tree: object = None                            # the analysis's parse (never changed: PlainCode)
    slots: tuple = ()                              # (notebook name, cell-function name) per output
    jit_noted: float = 0.0                         # machine-code compile seconds already counted
    jit_due: bool = False                          # a compile ran since: its machine code's cost to count

    def __post_init__(self):
        # the function's locals that hold the cell's outputs (a renamed input the cell rebinds
        # is the notebook's name all the same: dropping it lost numpy-100's `Z`)
        self.slots = tuple((k, self.local_of.get(k, k)) for k in sorted(self.outputs - self.shared))


class Deferred:
    """A cell's CompiledFunction, built on first use: a cell whose runs stay plain (its first
    runs, by the decision's rule) never pays for building and compiling its cell function
    (a few milliseconds per new cell, most of a plain first run's overhead)."""

    __slots__ = ("_make", "_cf")

    def __init__(self, make):
        object.__setattr__(self, "_make", make)
        object.__setattr__(self, "_cf", None)

    @property
    def is_built(self) -> bool:
        return self._cf is not None

    def built(self):
        if self._cf is None:
            object.__setattr__(self, "_cf", self._make())
        return self._cf

    def __getattr__(self, name):
        return getattr(self.built(), name)

    def __setattr__(self, name, value):
        setattr(self.built(), name, value)

    def __call__(self, *args, **kwargs):
        return self.built()(*args, **kwargs)

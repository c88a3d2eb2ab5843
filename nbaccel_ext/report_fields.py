"""Tolerant reading and formatting of a compile report's fields, for the renderings in ``html.py``.

A report dict may miss any key or hold a value of an unexpected type (``docs/report.md``), so
every read goes through a helper here that returns a safe default; the number formatters
(seconds, speedups, bytes) and ``jsonable`` live here too, so that the text and the HTML
renderings spell a number the same way.
"""

from __future__ import annotations

import math
from typing import Any

BREAKDOWN_KEYS = ("capture", "lowering", "codegen", "jit")
# left out of stable output: they change with timing and with the on-disk cache
_TIMING_DEPENDENT = ("cache", "tier", "pending_tier")


# ---------------------------------------------------------------------------------
# tolerant accessors and number formatting

def _num(x: Any) -> float | None:
    """A finite float, or None for anything else (None, NaN, strings, ...)."""
    if isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _str(x: Any) -> str:
    return "" if x is None else str(x)


def _items(report: dict, key: str, text_key: str = "reason") -> list[dict]:
    """report[key] as a list of dicts; bare strings become {text_key: s}."""
    raw = report.get(key) if isinstance(report, dict) else None
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, (list, tuple)):
        return []
    out = []
    for item in raw:
        if isinstance(item, dict):
            out.append(item)
        elif item is not None:
            out.append({text_key: str(item)})
    return out


def _strs(x: Any) -> list[str]:
    if isinstance(x, str):
        return [x] if x else []
    if isinstance(x, (list, tuple)):
        return [str(v) for v in x if v is not None and str(v)]
    return []


def _speedup(r: dict) -> float | None:
    v = r.get("verdict")
    if isinstance(v, dict):                  # the decision's verdict is the only headline
        s = _num(v.get("ratio"))
        return s if s is not None and s > 0 else None
    if r.get("fallback") or (r.get("speedup_note") and not r.get("speedup")):   # too short / ran plainly
        return None
    s = _num(r.get("speedup"))
    if s is None:
        e, c = _num(r.get("eager_seconds")), _num(r.get("compiled_seconds"))
        if e is not None and c:
            s = e / c
    return s if s is not None and s > 0 else None


def _sig(v: float) -> str:
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_seconds(s: Any) -> str:
    """Human duration: '850 ns', '12.3 µs', '4.56 ms', '1.20 s'; '—' when unknown."""
    v = _num(s)
    if v is None or v < 0:
        return "—"
    if v == 0:
        return "0 s"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if v >= scale:
            return f"{_sig(v / scale)} {unit}"
    return f"{_sig(v * 1e9)} ns"


def fmt_speedup(x: Any) -> str:
    """'10.0×', '1.52×', '0.043×' (never '0.00×'); '—' when unknown."""
    v = _num(x)
    if v is None or v <= 0:
        return "—"
    return f"{v:.2g}×" if v < 0.1 else f"{_sig(v)}×"


def _headline(r: dict, sp) -> str:
    """The words beside the speedup: faster / slower / too short to measure / ran plainly."""
    v = r.get("verdict")
    if isinstance(v, dict) and not r.get("fallback"):
        return _str(v.get("label")) or _str(v.get("headline"))
    if r.get("fallback"):
        return "ran plainly"
    note = r.get("speedup_note")
    if sp is None:
        return str(note) if note else "speedup not measured"
    # the baseline is the user's own plain code once it was timed; until then nbaccel's
    # interpreter on the captured graphs, which is said so
    base = "plain" if r.get("baseline") == "plain" else "eager (captured graphs only)"
    text = f"{'faster' if sp >= 1 else 'slower'} than {base}"
    return f"{text}; {note}" if note else text


def _sides(r: dict):
    """((label, seconds), (label, seconds)) of the bars: the plain code against the compiled
    runs (medians, from the verdict); nbaccel's eager interpreter only where no verdict exists."""
    v = r.get("verdict")
    if isinstance(v, dict):
        return ("plain", _num(v.get("plain_seconds"))), ("compiled", _num(v.get("compiled_seconds")))
    base = "plain" if r.get("baseline") == "plain" else "eager"
    return (base, _num(r.get("eager_seconds"))), ("compiled", _num(r.get("compiled_seconds")))


def _timed(r: dict, side: str, s: float) -> str:
    """A median with the spread of the runs behind it: '1.20 ms (1.18–1.31)'."""
    v = r.get("verdict")
    spread = v.get(f"{side}_spread") if isinstance(v, dict) else None
    if isinstance(spread, (list, tuple)) and len(spread) == 2 and spread[0] != spread[1]:
        return f"{fmt_seconds(s)} ({fmt_seconds(spread[0])}–{fmt_seconds(spread[1])})"
    return fmt_seconds(s)


def fmt_bytes(n: Any) -> str:
    """'512 B', '3.40 MiB'; '—' when unknown."""
    v = _num(n)
    if v is None or v < 0:
        return "—"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024 or unit == "GiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{_sig(v)} {unit}"
        v /= 1024
    return "—"  # unreachable


def jsonable(x: Any, _depth: int = 0) -> Any:
    """A JSON-safe copy: tuples -> lists, NumPy scalars -> Python, NaN/inf -> None,
    anything unknown -> str. Keeps the widget's comm message valid whatever the
    compiler puts into a report."""
    if _depth > 20:
        return str(x)
    if x is None or isinstance(x, (bool, str, int)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): jsonable(v, _depth + 1) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v, _depth + 1) for v in x]
    item = getattr(x, "item", None)  # NumPy scalars
    if callable(item) and getattr(x, "ndim", 1) == 0:
        try:
            return jsonable(item(), _depth + 1)
        except (TypeError, ValueError):
            pass
    return str(x)


def _breakdown(r: dict) -> list[tuple[str, float]]:
    bd = r.get("compile_breakdown")
    if not isinstance(bd, dict):
        return []
    keys = [k for k in BREAKDOWN_KEYS if k in bd] + [k for k in bd if k not in BREAKDOWN_KEYS]
    return [(str(k), _num(bd[k])) for k in keys if _num(bd[k]) is not None]


def _jit_split(r: dict) -> str:
    """'numba typing 0.20 s · llvm 0.15 s · ...': the jit part of the compile time, split."""
    jb = r.get("jit_breakdown")
    if not isinstance(jb, dict):
        return ""
    parts = [(str(k), _num(v)) for k, v in jb.items()]
    return " · ".join(f"{k} {fmt_seconds(v)}" for k, v in parts if v)


def _kernel_ops(k: dict) -> list[str]:
    return _strs(k.get("ops"))


def _ops_label(ops: list[str]) -> str:
    n = len(ops)
    return f"{n} op{'s' if n != 1 else ''}" + (f" ({', '.join(ops)})" if ops else "")


def _kernel_total(kernels: list[dict]) -> float:
    return sum(_num(k.get("seconds")) or 0.0 for k in kernels)


def _break_where(b: dict) -> str:
    fn, ln = _str(b.get("filename")), b.get("lineno")
    where = fn
    if ln not in (None, ""):
        where = f"{where} line {ln}" if where else f"line {ln}"
    return where

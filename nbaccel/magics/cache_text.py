"""Text of ``%nbaccel cache``: where the disk cache is, how big, which versions it holds."""
from __future__ import annotations

import time


def _bytes(n) -> str:
    from nbaccel_ext.html import fmt_bytes
    return fmt_bytes(n)


def render_info(info: dict) -> str:
    """``info`` is ``nbaccel.compiler.cache.cache.info()``. Stable output (nbval) leaves out the path,
    the sizes and the dates, which differ between machines."""
    import nbaccel_ext
    stable = nbaccel_ext.stable_output()
    where = "$NBACCEL_CACHE_DIR" if stable else info["location"]
    lines = [f"nbaccel disk cache: {where}"]
    if info.get("problem"):
        lines.append(f"  NOT fully used: {info['problem']}")
    current = next((v for v in info["versions"] if v["current"]), None)
    size = "" if stable else f"{_bytes(info['bytes'])} of a {_bytes(info['size_limit'])} limit, "
    lines.append(f"  {size}{info['entries']} kernel{'s' if info['entries'] != 1 else ''} in this version")
    lines.append(f"  this version: {info['current_version']}" + ("" if current else " (empty)"))
    others = [v for v in info["versions"] if not v["current"]]
    if others:
        lines.append(f"  other versions ({len(others)}, removed after a week unused):")
        for v in others:
            when = "" if stable else f", {_bytes(v['bytes'])}, last used " + \
                time.strftime("%Y-%m-%d", time.localtime(v["last_used"]))
            lines.append(f"    {v['name']}: {v['entries']} kernel{'s' if v['entries'] != 1 else ''}{when}")
    for f in info.get("faults", []):
        if f != info.get("problem"):
            lines.append(f"  this session: {f}")
    lines.append("  clear with: %nbaccel cache clear [all | current | VERSION]")
    return "\n".join(lines)


def render_cleared(which: str, root: str, removed: int) -> str:
    import nbaccel_ext
    what = {"all": "every version", "current": "this version"}.get(which, which)
    where = "$NBACCEL_CACHE_DIR" if nbaccel_ext.stable_output() else root
    return f"nbaccel: cleared {what} of the disk cache at {where} ({_bytes(removed)})"

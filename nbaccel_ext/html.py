"""Text and static-HTML renderings of a compile report and of the status dashboard.

These are the fallbacks shown where the widget cannot run: terminal IPython, nbconvert
exports, notebooks reopened without a kernel. They take the plain report dict (see
``docs/report.md``); every key may be missing, empty or of an unexpected type, so each
access goes through a tolerant helper of ``report_fields.py``, which also formats the numbers.

``stable=True`` drops every wall-clock number (times, speedup values, shares, sizes) and
the fields that depend on timing or on what is already cached (cache state, tier, the
tier still compiling), so that notebook tests comparing outputs (nbval) see the same text
on every run.
"""

from __future__ import annotations

import html as _html
from typing import Any

# the formatters and jsonable are public here too: the widget and the magics import them from here
from .report_fields import (
    _TIMING_DEPENDENT, BREAKDOWN_KEYS, _break_where, _breakdown, _headline, _items, _jit_split,
    _kernel_ops, _kernel_total, _num, _ops_label, _sides, _speedup, _str, _strs, _timed,
    fmt_bytes, fmt_seconds, fmt_speedup, jsonable,
)

__all__ = [
    "render_text", "render_html", "render_dashboard_text", "render_dashboard_html",
    "fmt_seconds", "fmt_speedup", "fmt_bytes", "jsonable",
]


# ---------------------------------------------------------------------------------
# text

def _status_bits(r: dict, stable: bool) -> list[str]:
    bits = []
    if r.get("cache") and not stable:
        bits.append(f"cache {r['cache']}")
    if r.get("tier") and not stable:
        tier = f"tier {r['tier']}"
        if r.get("pending_tier"):
            tier += f" ({r['pending_tier']} compiling…)"
        bits.append(tier)
    for key in ("device", "backend", "mode"):
        if r.get(key):
            bits.append(f"{key} {r[key]}")
    if not stable and _num(r.get("transfer_seconds")) is not None:
        bits.append(f"transfer {fmt_seconds(r['transfer_seconds'])}")
    return bits


def render_text(report: dict, stable: bool = False) -> str:
    """A compact multi-line summary of a report (the text/plain fallback)."""
    r = report if isinstance(report, dict) else {}
    name = _str(r.get("name")) or "compiled call"
    lines = []
    sp = _speedup(r)
    if stable:
        lines.append(f"nbaccel · {name}")
    else:
        head = _headline(r, sp) if sp is None else f"{fmt_speedup(sp)} {_headline(r, sp)}"
        (lb, e), (lc, c) = _sides(r)
        if e is not None and c is not None:
            head += f" ({lb} {_timed(r, 'plain', e)} → {lc} {_timed(r, 'compiled', c)})"
        lines.append(f"nbaccel · {name} — {head}")
        v = r.get("verdict")
        if isinstance(v, dict) and v.get("changed"):
            lines.append(f"changed: {_str(v['changed'])}")
    if r.get("fallback"):
        lines.append(f"ran plainly: {_str(r.get('fallback'))}")
    elif r.get("path") in ("cheap", "mixed", "dask") and r.get("path_reason"):
        lines.append(f"path: {_str(r.get('path'))} — {_str(r.get('path_reason'))}")
    status = _status_bits(r, stable)
    if not stable and _num(r.get("compile_seconds")) is not None and r.get("tier") != "plain":
        comp = f"compile {fmt_seconds(r['compile_seconds'])}"
        bd = _breakdown(r)
        if bd:
            comp += " (" + " · ".join(f"{k} {fmt_seconds(v)}" for k, v in bd) + ")"
        if _jit_split(r):
            comp += f"; jit: {_jit_split(r)}"
        status.insert(0, comp)
    if not stable and _num(r.get("first_call_seconds")) is not None and r.get("tier") != "plain":
        status.insert(0, f"first call {fmt_seconds(r['first_call_seconds'])} (compile included)")
    if status:
        lines.append(" · ".join(status))
    if r.get("device_note"):
        lines.append(f"device: {_str(r['device_note'])}")

    recs = _items(r, "recompiles")
    if recs:
        lines.append(f"recompiles ({len(recs)}):")
        for i, rec in enumerate(recs, 1):
            line = f"  {i}. {_str(rec.get('reason')) or '(no reason recorded)'}"
            dyn = _strs(rec.get("dynamic_dims"))
            if dyn:
                line += f"  [dynamic: {', '.join(dyn)}]"
            lines.append(line)
    dyn = _strs(r.get("dynamic_dims"))
    if dyn:
        lines.append(f"dynamic dims: {', '.join(dyn)}")
    if r.get("cache_problem"):
        lines.append(f"disk cache: {_str(r['cache_problem'])}")

    breaks = _items(r, "graph_breaks")
    if breaks:
        lines.append(f"graph breaks ({len(breaks)}):")
        for b in breaks:
            where, src = _break_where(b), _str(b.get("line")).strip()
            lines.append("  " + ": ".join(p for p in (where, src) if p) if (where or src) else "  (unknown location)")
            if b.get("reason"):
                lines.append(f"    reason: {b['reason']}")
            if b.get("fix"):
                lines.append(f"    fix: {b['fix']}")

    kernels = _items(r, "kernels", "name")
    if kernels:
        lines.append(f"kernels ({len(kernels)}):")
        total = _kernel_total(kernels)
        width = max(len(_str(k.get("name"))) for k in kernels)
        for k in kernels:
            place = "/".join(p for p in (_str(k.get("device")), _str(k.get("backend"))) if p) or "?"
            ranges = _str(k.get("ranges"))
            row = f"  {_str(k.get('name')).ljust(width)}  {ranges + '  ' if ranges else ''}" \
                  f"{_ops_label(_kernel_ops(k))}  {place}"
            sec = _num(k.get("seconds"))
            if not stable and sec is not None:
                row += f"  {fmt_seconds(sec)}"
                if total > 0:
                    row += f"  {100 * sec / total:.0f}%"
            lines.append(row)

    hist = _items(r, "history", "cache")
    if hist and not stable:
        times = [fmt_seconds(h.get("compiled_seconds")) for h in hist[-8:]]
        lines.append("last runs: " + ", ".join(times))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------
# static HTML (inline styles only: <style> blocks do not survive every sanitiser)

_FG = "var(--jp-ui-font-color1,#1f2328)"
_MUTED = "var(--jp-ui-font-color2,#59636e)"
_BORDER = "var(--jp-border-color2,#d0d7de)"
_ACCENT = "var(--jp-brand-color1,#1976d2)"
_CODE = "var(--jp-code-font-family,ui-monospace,SFMono-Regular,Menlo,Consolas,monospace)"
_ROOT = (f"font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;"
         f"color:{_FG};border:1px solid {_BORDER};border-radius:6px;padding:8px 12px;"
         f"max-width:100%;box-sizing:border-box;overflow-wrap:anywhere;line-height:1.45")
_H = f"margin:8px 0 2px;font-weight:600;font-size:12px;color:{_MUTED};text-transform:uppercase;letter-spacing:.04em"
_BADGE = (f"display:inline-block;padding:0 6px;margin:2px 4px 2px 0;border:1px solid {_BORDER};"
          "border-radius:9px;font-size:12px")
_TD = f"padding:2px 8px 2px 0;border-bottom:1px solid {_BORDER};text-align:left;vertical-align:top"
_PRE = (f"font-family:{_CODE};font-size:12px;max-height:320px;overflow:auto;margin:4px 0;"
        f"padding:6px;border:1px solid {_BORDER};border-radius:4px;white-space:pre")


def _e(x: Any) -> str:
    return _html.escape(_str(x), quote=True)


def _badge(label: str, value: Any) -> str:
    return f'<span style="{_BADGE}"><span style="color:{_MUTED}">{_e(label)}</span> {_e(value)}</span>'


def _bar(frac: float, color: str = _ACCENT, width: str = "100%") -> str:
    pct = max(0.0, min(1.0, frac)) * 100
    return (f'<span style="display:inline-block;vertical-align:middle;width:{width};height:8px;'
            f'background:{_BORDER};border-radius:4px;overflow:hidden">'
            f'<span style="display:block;height:100%;width:{pct:.1f}%;background:{color}"></span></span>')


def _html_header(r: dict, stable: bool) -> list[str]:
    out = [f'<div style="font-weight:600">nbaccel · {_e(r.get("name") or "compiled call")}</div>']
    if r.get("fallback"):
        out.append(f'<div style="color:{_MUTED}">ran plainly: {_e(r.get("fallback"))}</div>')
    elif r.get("path") in ("cheap", "mixed", "dask") and r.get("path_reason"):
        out.append(f'<div style="color:{_MUTED}">path: {_e(r.get("path"))} — {_e(r.get("path_reason"))}</div>')
    if not stable:
        sp = _speedup(r)
        label = _headline(r, sp)
        out.append(f'<div><span style="font-size:22px;font-weight:700;color:{_ACCENT}">{_e(fmt_speedup(sp))}</span>'
                   f' <span style="color:{_MUTED}">{label}</span></div>')
        (lb, e), (lc, c) = _sides(r)
        if e is not None or c is not None:
            top = max(e or 0.0, c or 0.0) or 1.0
            out.append('<table style="border-collapse:collapse;width:100%;max-width:420px">')
            for label, v, col in ((lb, e, _MUTED), (lc, c, _ACCENT)):
                out.append(f'<tr><td style="padding:1px 8px 1px 0;width:5em">{label}</td>'
                           f'<td style="padding:1px 0;width:100%">{_bar((v or 0) / top, col)}</td>'
                           f'<td style="padding:1px 0 1px 8px;white-space:nowrap">{_e(fmt_seconds(v))}</td></tr>')
            out.append("</table>")
        if _num(r.get("compile_seconds")) is not None and r.get("tier") != "plain":
            bd = " · ".join(f"{_e(k)} {_e(fmt_seconds(v))}" for k, v in _breakdown(r))
            js = _jit_split(r)
            out.append(f'<div>compile {_e(fmt_seconds(r["compile_seconds"]))}'
                       + (f' <span style="color:{_MUTED}">({bd})</span>' if bd else "")
                       + (f' <span style="color:{_MUTED}">jit: {_e(js)}</span>' if js else "") + "</div>")
    badges = []
    for key in ("cache", "tier", "device", "backend", "mode"):
        if r.get(key) and not (stable and key in _TIMING_DEPENDENT):
            badges.append(_badge(key, r[key]))
    if r.get("pending_tier") and not stable:
        badges.append(_badge("", f"{r['pending_tier']} compiling…"))
    if not stable and _num(r.get("transfer_seconds")) is not None:
        badges.append(_badge("transfer", fmt_seconds(r["transfer_seconds"])))
    if badges:
        out.append("<div>" + "".join(badges) + "</div>")
    if r.get("device_note"):
        out.append(f'<div style="color:{_MUTED}">device: {_e(r["device_note"])}</div>')
    return out


def render_html(report: dict, stable: bool = False) -> str:
    """A self-contained HTML rendering of a report with inline CSS (text/html fallback)."""
    r = report if isinstance(report, dict) else {}
    out = [f'<div class="nbaccel-static" style="{_ROOT}">']
    out += _html_header(r, stable)

    recs = _items(r, "recompiles")
    if recs:
        out.append(f'<div style="{_H}">Recompilations ({len(recs)})</div><ol style="margin:0;padding-left:22px">')
        for rec in recs:
            dyn = _strs(rec.get("dynamic_dims"))
            tag = f' <span style="color:{_MUTED}">dynamic: {_e(", ".join(dyn))}</span>' if dyn else ""
            out.append(f"<li>{_e(rec.get('reason') or '(no reason recorded)')}{tag}</li>")
        out.append("</ol>")
    dyn = _strs(r.get("dynamic_dims"))
    if dyn:
        out.append(f'<div>dynamic dims: <code style="font-family:{_CODE}">{_e(", ".join(dyn))}</code></div>')
    if r.get("cache_problem"):
        out.append(f"<div><b>disk cache:</b> {_e(r['cache_problem'])}</div>")

    breaks = _items(r, "graph_breaks")
    if breaks:
        out.append(f'<div style="{_H}">Graph breaks ({len(breaks)})</div>')
        for b in breaks:
            out.append(f'<div style="margin:2px 0 6px;padding-left:8px;border-left:3px solid var(--jp-warn-color1,#e65100)">'
                       f'<div style="color:{_MUTED}">{_e(_break_where(b))}</div>')
            if b.get("line"):
                out.append(f'<code style="font-family:{_CODE}">{_e(_str(b["line"]).strip())}</code>')
            if b.get("reason"):
                out.append(f"<div>{_e(b['reason'])}</div>")
            if b.get("fix"):
                out.append(f"<div><b>fix:</b> {_e(b['fix'])}</div>")
            out.append("</div>")

    kernels = _items(r, "kernels", "name")
    if kernels:
        total = _kernel_total(kernels)
        out.append(f'<div style="{_H}">Device placement ({len(kernels)} kernels)</div>'
                   '<div style="overflow-x:auto"><table style="border-collapse:collapse;width:100%">'
                   "<tr>" + "".join(f'<th style="{_TD}">{h}</th>' for h in
                                    ("kernel", "ranges", "ops", "device", "backend")
                                    + (() if stable else ("time", "share"))) + "</tr>")
        for k in kernels:
            ops = _kernel_ops(k)
            cells = [f'<code style="font-family:{_CODE};overflow-wrap:anywhere;word-break:break-all">'
                     f'{_e(k.get("name"))}</code>',
                     f'<code style="font-family:{_CODE}">{_e(k.get("ranges"))}</code>',
                     f'{len(ops)} <span style="color:{_MUTED}">{_e(", ".join(ops))}</span>',
                     _e(k.get("device")), _e(k.get("backend"))]
            if not stable:
                sec = _num(k.get("seconds"))
                share = (sec / total) if (sec is not None and total > 0) else None
                cells.append(_e(fmt_seconds(sec)))
                cells.append("" if share is None else f"{_bar(share, width='48px')} {100 * share:.0f}%")
            out.append("<tr>" + "".join(f'<td style="{_TD}">{c}</td>' for c in cells) + "</tr>")
        out.append("</table></div>")

    hist = _items(r, "history", "cache")
    if hist and not stable:
        runs = ", ".join(_e(fmt_seconds(h.get("compiled_seconds"))) for h in hist[-8:])
        out.append(f'<div style="color:{_MUTED};margin-top:4px">last runs: {runs}</div>')

    for key, title in (("graph", "Captured graph"), ("code", "Generated code")):
        if r.get(key):
            out.append(f'<details><summary style="cursor:pointer">{title}</summary>'
                       f'<pre style="{_PRE}">{_e(r[key])}</pre></details>')
    out.append("</div>")
    return "".join(out)


# ---------------------------------------------------------------------------------
# dashboard (%nbaccel status)

def _cell_recompiles(c: dict) -> int:
    rec = c.get("recompiles")
    if isinstance(rec, (list, tuple)):
        return len(rec)
    n = _num(rec)
    return int(n) if n is not None else 0


def cell_saved_seconds(c: dict) -> float | None:
    """Net time a cell saved, as its decision measured it (compiler/replay/decision.py): the front end
    does no arithmetic of its own."""
    return _num(c.get("saved_seconds"))


def _dash_parts(status: dict) -> tuple[list[dict], float | None]:
    cells = _items(status, "cells", "name")
    saved = [cell_saved_seconds(c) for c in cells]
    known = [s for s in saved if s is not None]
    return cells, (sum(known) if known else None)


def _fmt_saved(s: float | None) -> str:
    if s is None:
        return "—"
    return fmt_seconds(s) if s >= 0 else f"−{fmt_seconds(-s)}"


def render_dashboard_text(status: dict, stable: bool = False) -> str:
    """Text rendering of the %nbaccel status dashboard."""
    st = status if isinstance(status, dict) else {}
    cells, total = _dash_parts(st)
    lines = [f"nbaccel status · {len(cells)} compiled cell{'s' if len(cells) != 1 else ''}"]
    if cells:
        width = max(len(_str(c.get("name"))) for c in cells)
        for c in cells:
            row = f"  {_str(c.get('name')).ljust(width)}"
            if not stable:
                row += f"  {fmt_speedup(_speedup(c)):>7}"
            row += f"  recompiles {_cell_recompiles(c)}  calls {int(_num(c.get('calls')) or 0)}"
            if c.get("tier") and not stable:
                row += f"  tier {c['tier']}"
            lines.append(row)
        if not stable:
            lines.append(f"time saved (net of compile time): {_fmt_saved(total)}")
    for key, label in (("backends", "backends"), ("devices", "devices")):
        vals = _strs(st.get(key))
        if vals:
            lines.append(f"{label}: {', '.join(vals)}")
    if st.get("cache_dir"):
        size = "" if stable or _num(st.get("cache_bytes")) is None else f" ({fmt_bytes(st['cache_bytes'])})"
        lines.append(f"cache: {st['cache_dir']}{size}")
    return "\n".join(lines)


def render_dashboard_html(status: dict, stable: bool = False) -> str:
    """Static HTML rendering of the %nbaccel status dashboard."""
    st = status if isinstance(status, dict) else {}
    cells, total = _dash_parts(st)
    out = [f'<div class="nbaccel-static" style="{_ROOT}">'
           f'<div style="font-weight:600">nbaccel status · {len(cells)} compiled cell{"s" if len(cells) != 1 else ""}</div>']
    if cells:
        heads = ("cell",) + (() if stable else ("speedup",)) + ("recompiles", "calls") + (() if stable else ("tier",))
        out.append('<div style="overflow-x:auto"><table style="border-collapse:collapse;width:100%"><tr>'
                   + "".join(f'<th style="{_TD}">{h}</th>' for h in heads) + "</tr>")
        for c in cells:
            vals = [_e(c.get("name"))] + ([] if stable else [_e(fmt_speedup(_speedup(c)))])
            vals += [str(_cell_recompiles(c)), str(int(_num(c.get("calls")) or 0))]
            vals += [] if stable else [_e(c.get("tier"))]
            out.append("<tr>" + "".join(f'<td style="{_TD}">{v}</td>' for v in vals) + "</tr>")
        out.append("</table></div>")
        if not stable:
            out.append(f"<div>time saved (net of compile time): <b>{_e(_fmt_saved(total))}</b></div>")
    for key in ("backends", "devices"):
        vals = _strs(st.get(key))
        if vals:
            out.append(f"<div>{key}: " + "".join(_badge("", v) for v in vals) + "</div>")
    if st.get("cache_dir"):
        size = "" if stable or _num(st.get("cache_bytes")) is None else f" ({_e(fmt_bytes(st['cache_bytes']))})"
        out.append(f'<div>cache: <code style="font-family:{_CODE}">{_e(st["cache_dir"])}</code>{size}</div>')
    out.append("</div>")
    return "".join(out)

"""The report widget, its plain fallbacks, the progress indicator and the dashboard.

The widgets are anywidgets: one ES module (static/report.js) renders three kinds of view
(``report``, ``progress``, ``dashboard``, chosen by the synced ``kind`` trait) and one
stylesheet (static/report.css) styles them. anywidget and ipywidgets are optional: without
them, or outside a kernel, the ``*View`` objects show the text/HTML renderings instead.

Nothing here imports the compiler: reports arrive as plain dicts.
"""

from __future__ import annotations

import os
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

from .html import jsonable, render_dashboard_html, render_dashboard_text, render_html, render_text

__all__ = [
    "ReportWidget", "ReportView", "DashboardWidget", "DashboardView", "Progress",
    "display_report", "display_dashboard", "widgets_available", "stable_output",
]

STATIC = Path(__file__).parent / "static"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

try:  # the jupyter extra
    import anywidget as _anywidget
    import traitlets as _t
except ImportError:  # pragma: no cover - exercised only without the extra
    _anywidget = None


def widgets_available() -> bool:
    """True when anywidget (and so ipywidgets) can be imported."""
    return _anywidget is not None


def stable_output() -> bool:
    """True when NBACCEL_STABLE_OUTPUT=1: leave wall-clock numbers out of text outputs."""
    return os.environ.get("NBACCEL_STABLE_OUTPUT", "") == "1"


def _in_kernel() -> bool:
    """True inside a Jupyter kernel (where a widget can render), False in a terminal."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def _resolve(stable: bool | None) -> bool:
    return stable_output() if stable is None else bool(stable)


class _Fallback:
    """Mixin: a text/plain + text/html bundle from ``_text()`` / ``_html()``."""

    def _fallback_bundle(self) -> dict:
        return {"text/plain": self._text(), "text/html": self._html()}

    def _repr_html_(self) -> str:
        return self._html()

    def __str__(self) -> str:
        return self._text()


def _widget_bundle(widget: Any, fallback: dict, **kwargs: Any) -> tuple[dict, dict]:
    """ipywidgets' widget-view bundle with our text/plain and text/html added."""
    got = _anywidget.AnyWidget._repr_mimebundle_(widget, **kwargs)
    data, meta = got if isinstance(got, tuple) else (got or {}, {})
    data = dict(data or {})
    data.update(fallback)
    return data, dict(meta or {})


# ---------------------------------------------------------------------------------
# plain views (no widget machinery)

class ReportView(_Fallback):
    """A report shown as text/plain + text/html only (terminals, exports, no widgets)."""

    def __init__(self, report: dict, stable: bool | None = None):
        self.report = jsonable(report if isinstance(report, dict) else {})
        self.stable = _resolve(stable)

    def _text(self) -> str:
        return render_text(self.report, stable=self.stable)

    def _html(self) -> str:
        return render_html(self.report, stable=self.stable)

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):
        return self._fallback_bundle()

    def __repr__(self) -> str:
        return self._text()


def _status_dict(cells, backends, devices, cache_dir, cache_bytes) -> dict:
    return jsonable({"cells": list(cells or []), "backends": list(backends or []),
                     "devices": list(devices or []), "cache_dir": cache_dir,
                     "cache_bytes": cache_bytes})


class DashboardView(_Fallback):
    """The %nbaccel status dashboard as text/plain + text/html only."""

    def __init__(self, cells: list[dict], *, backends=(), devices=(), cache_dir=None,
                 cache_bytes=None, stable: bool | None = None):
        self.status = _status_dict(cells, backends, devices, cache_dir, cache_bytes)
        self.stable = _resolve(stable)

    def _text(self) -> str:
        return render_dashboard_text(self.status, stable=self.stable)

    def _html(self) -> str:
        return render_dashboard_html(self.status, stable=self.stable)

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):
        return self._fallback_bundle()

    def __repr__(self) -> str:
        return self._text()


class _ProgressView(_Fallback):
    def __init__(self, message: str):
        self.message = message

    def _text(self) -> str:
        return f"nbaccel: {self.message}"

    def _html(self) -> str:
        import html
        return (f'<div class="nbaccel-static" style="font-size:13px;color:var(--jp-ui-font-color2,#59636e)">'
                f"⏳ nbaccel: {html.escape(self.message)}</div>")

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):
        return self._fallback_bundle()

    def __repr__(self) -> str:
        return self._text()


# ---------------------------------------------------------------------------------
# widgets

if _anywidget is not None:

    class _Base(_anywidget.AnyWidget, _Fallback):
        _esm = STATIC / "report.js"
        _css = STATIC / "report.css"
        kind = _t.Unicode("report").tag(sync=True)

        def _repr_mimebundle_(self, **kwargs):
            return _widget_bundle(self, self._fallback_bundle(), **kwargs)

        def __repr__(self) -> str:
            return self._text()

    class ReportWidget(_Base):
        """The inline compile report: an anywidget whose ``report`` trait is the plain
        report dict (``CompileReport.to_dict()``). Assigning a new dict re-renders it.

        ``Progress`` uses the same widget with ``kind="progress"`` and turns it into the
        report when done: one model, updated in place, so the output never flickers
        (closing a widget whose output was replaced would hide the new one)."""

        report = _t.Dict().tag(sync=True)
        message = _t.Unicode("").tag(sync=True)

        def __init__(self, report: dict | None = None, stable: bool | None = None, *,
                     kind: str = "report", message: str = "", **kwargs):
            super().__init__(kind=kind, message=message, report=jsonable(report or {}), **kwargs)
            self.stable = _resolve(stable)

        @_t.validate("report")
        def _clean(self, proposal):
            value = proposal["value"]
            return jsonable(value) if isinstance(value, dict) else {}

        def _text(self) -> str:
            if self.kind == "progress":
                return _ProgressView(self.message)._text()
            return render_text(self.report, stable=self.stable)

        def _html(self) -> str:
            if self.kind == "progress":
                return _ProgressView(self.message)._html()
            return render_html(self.report, stable=self.stable)

    class DashboardWidget(_Base):
        """The %nbaccel status dashboard: one row per compiled cell (name, speedup,
        recompiles, calls), total time saved, backends/devices, cache dir and size."""

        status = _t.Dict().tag(sync=True)

        def __init__(self, cells: list[dict] | None = None, *, backends=(), devices=(),
                     cache_dir=None, cache_bytes=None, stable: bool | None = None, **kwargs):
            status = _status_dict(cells, backends, devices, cache_dir, cache_bytes)
            super().__init__(kind="dashboard", status=status, **kwargs)
            self.stable = _resolve(stable)

        def _text(self) -> str:
            return render_dashboard_text(self.status, stable=self.stable)

        def _html(self) -> str:
            return render_dashboard_html(self.status, stable=self.stable)

else:  # pragma: no cover - exercised only without the extra

    class _Missing:
        def __init__(self, *args, **kwargs):
            raise ImportError(f"{type(self).__name__} needs anywidget and ipywidgets: "
                              "pip install 'nbaccel[jupyter]'")

    class ReportWidget(_Missing):
        """Placeholder: install the jupyter extra for the widget."""

    class DashboardWidget(_Missing):
        """Placeholder: install the jupyter extra for the widget."""


# ---------------------------------------------------------------------------------
# display with in-place updates

_LIVE: OrderedDict[str, Any] = OrderedDict()  # display_id -> object shown under it
_LIVE_MAX = 256


def _remember(key: str, obj: Any, table: OrderedDict | None = None) -> None:
    """``table[key] = obj`` (default: the display table, looked up now), the most recent last;
    the oldest beyond ``_LIVE_MAX`` forgotten."""
    table = _LIVE if table is None else table
    table[key] = obj
    table.move_to_end(key)
    while len(table) > _LIVE_MAX:
        table.popitem(last=False)


def _show(obj: Any, display_id: str | None) -> None:
    from IPython.display import display
    if display_id is None:
        display(obj)
        return
    update = display_id in _LIVE
    _remember(display_id, obj)
    display(obj, display_id=display_id, update=update)


def _use_widgets() -> bool:
    return widgets_available() and _in_kernel()


# cell -> the ReportWidget its runs are shown with: opening a widget costs two comms (the model
# and its layout), 6-25 ms a run in a kernel, which a re-run cell's compiled time would carry
_MODELS: OrderedDict[str, Any] = OrderedDict()


def display_report(report: dict, display_id: str | None = None, *, stable: bool | None = None,
                   model_key: str | None = None) -> None:
    """Show a report under the current cell.

    In a kernel with anywidget this is a ReportWidget, elsewhere a ReportView (text/HTML).
    Calling again with the same ``display_id`` updates that output in place (the
    widget's trait is reassigned and the fallbacks refreshed) instead of adding one.
    ``model_key`` (a cell): each run of it shows a new output of one widget model, updated
    (one message) rather than opened again. Returns None, so a call ending a cell does not
    show the report a second time."""
    old = _LIVE.get(display_id) if display_id is not None else None
    if old is None and model_key is not None:
        old = _MODELS.get(model_key)
    if _use_widgets() and isinstance(old, ReportWidget):
        with old.hold_sync():  # one message: the view redraws once
            old.report = report if isinstance(report, dict) else {}
            old.kind = "report"
        old.stable = _resolve(stable)
        obj = old
    elif _use_widgets():
        obj = ReportWidget(report, stable=stable)
    else:
        obj = ReportView(report, stable=stable)
    if model_key is not None and isinstance(obj, ReportWidget):
        _remember(model_key, obj, _MODELS)
    _show(obj, display_id)  # also refreshes the text/html fallbacks stored in the notebook


def display_dashboard(cells: list[dict], *, display_id: str | None = None, **info) -> None:
    """Show the %nbaccel status dashboard (widget in a kernel, text/HTML elsewhere).
    ``info``: backends, devices, cache_dir, cache_bytes, stable."""
    obj = DashboardWidget(cells, **info) if _use_widgets() else DashboardView(cells, **info)
    _show(obj, display_id)


class Progress:
    """A "compiling…" indicator (an indeterminate bar) under the cell, replaced in place
    by the report with ``finish(report)``.

        p = Progress("compiling cell In[3]…")   # shown now (show=False to defer)
        ...
        p.finish(report)                          # or p.close() on error

    Also a context manager: leaving the block without ``finish`` removes the bar."""

    def __init__(self, message: str = "compiling…", display_id: str | None = None, show: bool = True):
        self.message = message
        self.display_id = display_id or f"nbaccel-{uuid.uuid4().hex}"
        self._obj = None
        self._done = False
        if show:
            self.show()

    def show(self) -> None:
        """Display the indicator (once)."""
        if self._obj is not None or self._done:
            return
        if _use_widgets():
            self._obj = ReportWidget(kind="progress", message=self.message)
        else:
            self._obj = _ProgressView(self.message)
        _show(self._obj, self.display_id)

    @property
    def shown(self) -> bool:
        return self._obj is not None

    def update(self, message: str) -> None:
        """Change the message (live in the widget; fallbacks are refreshed too)."""
        self.message = message
        if self._obj is None or self._done:
            return
        self._obj.message = message
        if not hasattr(self._obj, "model_id"):  # plain view: re-send the text
            _show(self._obj, self.display_id)

    def finish(self, report: dict, *, stable: bool | None = None) -> None:
        """Replace the indicator with the report (or just show the report if the
        indicator was never shown)."""
        self._done = True
        if self._obj is None:
            _LIVE.pop(self.display_id, None)
        display_report(report, display_id=self.display_id, stable=stable)

    def close(self) -> None:
        """Remove the indicator without showing a report."""
        if self._obj is None or self._done:
            self._done = True
            return
        self._done = True
        if _in_kernel():  # a terminal cannot take back what it printed
            from IPython.display import display
            display({"text/plain": ""}, raw=True, display_id=self.display_id, update=True)
        if hasattr(self._obj, "close"):
            self._obj.close()
        _LIVE.pop(self.display_id, None)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        if not self._done:
            self.close()

"""nbaccel's Jupyter front end: the inline compile report and the status dashboard.

``display_report(report_dict)`` shows a report under the current cell (an anywidget in
JupyterLab / Notebook, text or static HTML elsewhere). Reports are plain dicts
(``CompileReport.to_dict()``); this package never imports the compiler.
"""

from .html import render_dashboard_html, render_dashboard_text, render_html, render_text
from .widget import (
    DashboardView,
    DashboardWidget,
    Progress,
    ReportView,
    ReportWidget,
    display_dashboard,
    display_report,
    stable_output,
    widgets_available,
)

__all__ = [
    "ReportWidget", "ReportView", "DashboardWidget", "DashboardView", "Progress",
    "display_report", "display_dashboard", "render_text", "render_html",
    "render_dashboard_text", "render_dashboard_html", "stable_output", "widgets_available",
]

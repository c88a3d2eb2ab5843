"""Fast tests of the report widget and its fallbacks (no browser, no kernel)."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import nbaccel_ext
from nbaccel_ext import html as H
from nbaccel_ext import widget as W

SAMPLE = {
    "name": "cell In[3]", "cache": "miss", "tier": "numpy", "pending_tier": "numba",
    "backend": "auto", "device": "cpu", "mode": "default",
    "compile_seconds": 0.12,
    "compile_breakdown": {"capture": 0.01, "lowering": 0.02, "codegen": 0.01, "jit": 0.08},
    "eager_seconds": 0.20, "compiled_seconds": 0.02, "speedup": 10.0,
    "recompiles": [
        {"reason": "x.shape[0]: 64 → 128 (dim 0 is now dynamic)", "dynamic_dims": ["x.shape[0]"]},
        {"reason": "dtype of y changed: float32 → float64", "dynamic_dims": []},
    ],
    "dynamic_dims": ["x.shape[0]"],
    "graph_breaks": [{"reason": "data-dependent branch: bool() of a tensor", "filename": "<cell In[3]>",
                      "lineno": 4, "line": "if x.sum() > 0:",
                      "fix": "use np.where(...) instead of an if on array data"}],
    "kernels": [
        {"name": "k0_fused_mul_add_tanh", "ops": ["multiply", "add", "tanh"], "device": "cpu",
         "backend": "numba", "seconds": 0.011},
        {"name": "matmul_0", "ops": ["matmul"], "device": "cuda", "backend": "cublas", "seconds": 0.004},
    ],
    "graph": "graph(x: f32[s0, 64]):\n  %0 = multiply(x, 2.0)  # scale\n  return %0",
    "code": "def k0(x, out):\n    for i in range(x.shape[0]):\n        out[i] = 'a' + 1.5e3\n",
    "history": [{"compiled_seconds": 0.03, "eager_seconds": 0.2, "cache": "miss"},
                {"compiled_seconds": 0.02, "eager_seconds": 0.2, "cache": "hit"}],
}

# a duration or a speedup, e.g. "20.0 ms", "1.5s", "10.0×", "73%"
TIMING = re.compile(r"\d(?:[\d.]*)\s*(?:ns|µs|us|ms|s|min|×|%)(?![\w])")
STATIC = Path(nbaccel_ext.__file__).parent / "static"


def _visible(html: str) -> str:
    """The text a reader sees (tags and their inline CSS removed)."""
    return H._html.unescape(re.sub(r"<[^>]+>", " ", html))


def _all_renderings(report, stable):
    return [H.render_text(report, stable=stable), _visible(H.render_html(report, stable=stable))]


# ---------------------------------------------------------------- bundles

def test_widget_bundle_has_widget_view_and_fallbacks():
    w = nbaccel_ext.ReportWidget(SAMPLE, stable=False)
    data, _meta = w._repr_mimebundle_()
    assert set(data) >= {W.WIDGET_MIME, "text/plain", "text/html"}
    assert data[W.WIDGET_MIME]["model_id"] == w.model_id
    assert "10.0×" in data["text/plain"] and "10.0×" in data["text/html"]


def test_report_view_bundle():
    data = nbaccel_ext.ReportView(SAMPLE, stable=False)._repr_mimebundle_()
    assert set(data) == {"text/plain", "text/html"}
    assert W.WIDGET_MIME not in data


def test_dashboard_bundles():
    # the saving is the decision's own figure (compiler/replay/decision.py): the front end only shows it
    cells = [{"name": "cell In[3]", "speedup": 4.0, "recompiles": 2, "calls": 10, "saved_seconds": 1.2,
              "eager_seconds": 0.2, "compiled_seconds": 0.05, "compile_seconds": 0.3, "tier": "numba"},
             {"name": "cell In[5]", "speedup": 1.5, "recompiles": [{"reason": "r"}], "calls": 1}]
    info = dict(backends=["numpy", "numba"], devices=["cpu"], cache_dir="/cache/nbaccel", cache_bytes=3 << 20)
    wdata, _ = nbaccel_ext.DashboardWidget(cells, stable=False, **info)._repr_mimebundle_()
    vdata = nbaccel_ext.DashboardView(cells, stable=False, **info)._repr_mimebundle_()
    assert W.WIDGET_MIME in wdata
    for data in (wdata, vdata):
        for mime in ("text/plain", "text/html"):
            out = data[mime]
            assert "cell In[3]" in out and "cell In[5]" in out and "4.00×" in out
            assert "numba" in out and "/cache/nbaccel" in out and "3.00 MiB" in out
            assert "1.20 s" in out
    stable = nbaccel_ext.render_dashboard_text(
        {"cells": cells, "cache_dir": "/c", "cache_bytes": 5}, stable=True)
    assert not TIMING.search(stable) and "MiB" not in stable and " B)" not in stable
    html = _visible(nbaccel_ext.render_dashboard_html({"cells": cells, "cache_bytes": 5}, stable=True))
    assert not TIMING.search(html) and "cell In[5]" in html


# ---------------------------------------------------------------- content

@pytest.mark.parametrize("render", [H.render_text, H.render_html])
def test_fallback_content(render):
    out = render(SAMPLE)
    assert "10.0×" in out
    for rec in SAMPLE["recompiles"]:
        assert H._html.escape(rec["reason"]) in out or rec["reason"] in out
    for k in SAMPLE["kernels"]:
        for key in ("name", "device", "backend"):
            assert k[key] in out
    assert "line 4" in out
    assert ("if x.sum() &gt; 0:" if render is H.render_html else "if x.sum() > 0:") in out
    assert "np.where" in out
    assert "200 ms" in out and "20.0 ms" in out and "120 ms" in out
    assert "jit" in out and "x.shape[0]" in out


def test_html_escapes_kernel_strings():
    evil = {"name": "<script>alert(1)</script>", "kernels": [{"name": "<b>k</b>", "device": "cpu"}],
            "graph_breaks": [{"line": "if a < b & c:", "reason": "x"}]}
    out = H.render_html(evil)
    assert "<script>" not in out and "<b>k</b>" not in out
    assert "&lt;script&gt;" in out and "if a &lt; b &amp; c:" in out


@pytest.mark.parametrize("stable", [True, False])
def test_stable_mode_has_no_timings(stable):
    for out in _all_renderings(SAMPLE, stable):
        found = TIMING.findall(out)
        assert bool(found) != stable, found
    if stable:  # structure is still there
        text = H.render_text(SAMPLE, stable=True)
        assert "x.shape[0]: 64 → 128" in text and "k0_fused_mul_add_tanh" in text and "cpu/numba" in text
        assert "compiling" not in text and "cache" not in text


def test_stable_from_env(monkeypatch):
    monkeypatch.setenv("NBACCEL_STABLE_OUTPUT", "1")
    assert not TIMING.search(repr(nbaccel_ext.ReportView(SAMPLE)))
    assert not TIMING.search(_visible(nbaccel_ext.ReportWidget(SAMPLE)._repr_mimebundle_()[0]["text/html"]))
    monkeypatch.setenv("NBACCEL_STABLE_OUTPUT", "0")
    assert TIMING.search(repr(nbaccel_ext.ReportView(SAMPLE)))


def _drop(report, key):
    r = dict(report)
    r.pop(key)
    return r


@pytest.mark.parametrize("report", [
    {}, {"name": "x"}, {"speedup": None, "kernels": None, "recompiles": "retraced"},
    {"kernels": [None, "k1", {"name": "k2"}], "graph_breaks": [{}], "history": [{}]},
    {"compile_breakdown": {"jit": "n/a"}, "eager_seconds": float("nan"), "compiled_seconds": 0},
    {"speedup": 0.5, "eager_seconds": 1, "compiled_seconds": 2},
] + [_drop(SAMPLE, k) for k in SAMPLE], ids=lambda r: ",".join(sorted(r))[:40] or "empty")
def test_renders_gracefully(report):
    for stable in (False, True):
        assert isinstance(H.render_text(report, stable=stable), str)
        assert H.render_html(report, stable=stable).startswith("<div")
    data, _ = nbaccel_ext.ReportWidget(report)._repr_mimebundle_()
    json.dumps(data)


def test_slower_and_computed_speedup():
    assert "slower" in H.render_text({"speedup": 0.5})
    assert "4.00×" in H.render_text({"eager_seconds": 0.4, "compiled_seconds": 0.1})


@pytest.mark.parametrize("s,want", [(None, "—"), (0, "0 s"), (2.5e-7, "250 ns"), (1.234e-5, "12.3 µs"),
                                    (0.00456, "4.56 ms"), (1.2, "1.20 s"), (150.0, "150 s")])
def test_fmt_seconds(s, want):
    assert H.fmt_seconds(s) == want


# ---------------------------------------------------------------- widget state

def test_traitlet_round_trip():
    w = nbaccel_ext.ReportWidget(copy.deepcopy(SAMPLE))
    assert w.report == SAMPLE
    assert w.get_state()["report"] == SAMPLE and w.get_state()["kind"] == "report"
    assert json.loads(json.dumps(w.get_state()["report"])) == SAMPLE
    new = dict(SAMPLE, cache="hit", speedup=12.0)
    w.report = new
    assert w.report == new


def test_report_made_json_safe():
    np = pytest.importorskip("numpy")
    w = nbaccel_ext.ReportWidget({"speedup": np.float64(3.0), "dims": ("a", "b"), "bad": float("inf"),
                                  "obj": object(), "n": np.int64(2)})
    assert w.report["speedup"] == 3.0 and w.report["dims"] == ["a", "b"] and w.report["bad"] is None
    assert isinstance(w.report["obj"], str) and w.report["n"] == 2
    json.dumps(w.get_state()["report"])


def test_esm_and_css_are_shipped_and_synced():
    w = nbaccel_ext.ReportWidget(SAMPLE)
    state = w.get_state()
    assert state["_esm"] == (STATIC / "report.js").read_text()
    assert state["_css"] == (STATIC / "report.css").read_text()


# ---------------------------------------------------------------- display / progress

class _Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, obj, *args, display_id=None, update=False, raw=False, **kw):
        self.calls.append((obj, display_id, update))


@pytest.fixture
def fake_display(monkeypatch):
    import IPython.display
    rec = _Recorder()
    monkeypatch.setattr(IPython.display, "display", rec)
    monkeypatch.setattr(W, "_LIVE", type(W._LIVE)())
    return rec


@pytest.mark.parametrize("in_kernel", [True, False])
def test_display_report_updates_in_place(fake_display, monkeypatch, in_kernel):
    monkeypatch.setattr(W, "_in_kernel", lambda: in_kernel)
    assert nbaccel_ext.display_report(SAMPLE, display_id="cell-3") is None  # no second echo
    nbaccel_ext.display_report(dict(SAMPLE, cache="hit"), display_id="cell-3")
    a, b = (c[0] for c in fake_display.calls)
    kinds = (nbaccel_ext.ReportWidget if in_kernel else nbaccel_ext.ReportView)
    assert isinstance(a, kinds) and isinstance(b, kinds)
    if in_kernel:
        assert a is b and a.report["cache"] == "hit"  # the live widget's trait changed
    assert [(c[1], c[2]) for c in fake_display.calls] == [("cell-3", False), ("cell-3", True)]
    nbaccel_ext.display_report(SAMPLE)  # no display_id: a plain display
    assert fake_display.calls[-1][1:] == (None, False)


@pytest.mark.parametrize("in_kernel", [True, False])
def test_progress_finish_replaces_bar(fake_display, monkeypatch, in_kernel):
    monkeypatch.setattr(W, "_in_kernel", lambda: in_kernel)
    p = nbaccel_ext.Progress("compiling cell In[3]")
    first = fake_display.calls[0][0]
    assert "compiling cell In[3]" in str(first)
    if in_kernel:
        assert first.get_state()["kind"] == "progress"
        assert "compiling cell In[3]" in first._repr_mimebundle_()[0]["text/html"]
    p.update("still compiling")
    p.finish(SAMPLE)
    shown, did, update = fake_display.calls[-1]
    assert did == p.display_id and update
    if in_kernel:  # the progress widget itself became the report: one model, no flicker
        assert shown is first and first.kind == "report" and first.report["name"] == "cell In[3]"
        assert first.message == "still compiling"
    else:
        assert "10.0×" in repr(shown)


def test_progress_not_shown_then_finish(fake_display, monkeypatch):
    monkeypatch.setattr(W, "_in_kernel", lambda: True)
    p = nbaccel_ext.Progress("compiling", show=False)
    assert not p.shown and fake_display.calls == []
    p.finish(SAMPLE)
    assert [c[2] for c in fake_display.calls] == [False]


def test_progress_context_manager_closes(fake_display, monkeypatch):
    monkeypatch.setattr(W, "_in_kernel", lambda: True)
    with pytest.raises(RuntimeError):
        with nbaccel_ext.Progress("compiling") as p:
            raise RuntimeError("user code failed")
    assert fake_display.calls[-1][1:] == (p.display_id, True)  # replaced by an empty output


# ---------------------------------------------------------------- the ES module

def test_esm_has_no_external_urls_and_exports_render():
    src = (STATIC / "report.js").read_text()
    urls = [u for u in re.findall(r"https?://[^\s\"'`)]+", src) if u != "http://www.w3.org/2000/svg"]
    assert urls == []
    assert not re.search(r"^\s*import\s", src, re.M)  # one self-contained module
    assert re.search(r"export default \{\s*render\s*\}", src)
    assert "innerHTML" not in src  # kernel text never parsed as HTML
    css = (STATIC / "report.css").read_text()
    assert "http" not in css and "@import" not in css
    for testid in ("speedup", "recompile-reason", "kernel-device", "graph-break"):
        assert f'testid: "{testid}"' in src


def test_esm_parses_as_module(tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: ES module syntax check skipped")
    mod = tmp_path / "report.mjs"
    mod.write_text((STATIC / "report.js").read_text())
    proc = subprocess.run([node, "--check", str(mod)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # and it really exports render (evaluating the module needs no DOM until render runs)
    probe = tmp_path / "probe.mjs"
    probe.write_text(f"import m from {json.dumps(mod.as_uri())};\n"
                     "if (typeof m.render !== 'function') process.exit(3);\n")
    proc = subprocess.run([node, str(probe)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_a_cells_runs_show_one_widget_updated_in_place(monkeypatch):
    """Each run of a cell displays a new output of the same ReportWidget (opening a widget per
    run cost two comms, 6-25 ms in a kernel)."""
    from nbaccel_ext import widget as W
    pytest.importorskip("anywidget")
    monkeypatch.setattr(W, "_use_widgets", lambda: True)
    shown = []
    monkeypatch.setattr(W, "_show", lambda obj, display_id: shown.append((obj, display_id)))
    W.display_report({"name": "In[1]"}, display_id="d1", model_key="cell-a")
    W.display_report({"name": "In[2]"}, display_id="d2", model_key="cell-a")
    W.display_report({"name": "In[3]"}, display_id="d3", model_key="cell-b")
    (first, d1), (second, d2), (other, _) = shown
    assert first is second and (d1, d2) == ("d1", "d2") and second.report["name"] == "In[2]"
    assert other is not first

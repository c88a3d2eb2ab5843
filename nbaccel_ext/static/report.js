// nbaccel report widget: one ES module (anywidget), no build step, no network.
// The synced trait `kind` picks the view: "report" (the compile report),
// "progress" (an indeterminate bar) or "dashboard" (%nbaccel status).
// All text from the kernel goes through textContent: nothing is parsed as HTML.

const BREAKDOWN = ["capture", "lowering", "codegen", "jit"];

// ---------------------------------------------------------------- small helpers

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "testid") el.dataset.testid = v;
    else if (k === "style") el.setAttribute("style", v);
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const num = (x) => (typeof x === "number" && Number.isFinite(x) ? x : null);
const str = (x) => (x === undefined || x === null ? "" : String(x));

function list(x, textKey) {
  if (x && !Array.isArray(x) && typeof x === "object") x = [x];
  if (!Array.isArray(x)) return [];
  return x.filter((v) => v !== null && v !== undefined)
    .map((v) => (typeof v === "object" ? v : { [textKey]: String(v) }));
}

function strs(x) {
  if (typeof x === "string") return x ? [x] : [];
  return Array.isArray(x) ? x.filter((v) => v !== null && v !== undefined).map(String) : [];
}

function sig(v) {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

function fmtSeconds(s) {
  s = num(s);
  if (s === null || s < 0) return "—";
  if (s === 0) return "0 s";
  if (s >= 1) return `${sig(s)} s`;
  if (s >= 1e-3) return `${sig(s * 1e3)} ms`;
  if (s >= 1e-6) return `${sig(s * 1e6)} µs`;
  return `${sig(s * 1e9)} ns`;
}

function fmtSpeedup(x) {
  x = num(x);
  if (x === null || x <= 0) return "—";
  return x < 0.1 ? `${Number(x.toPrecision(2))}×` : `${sig(x)}×`;   // never "0.00×"
}

function fmtBytes(n) {
  n = num(n);
  if (n === null || n < 0) return "—";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? `${n.toFixed(0)} B` : `${sig(n)} ${units[i]}`;
}

function speedupOf(r) {
  const v = r.verdict;
  if (v && typeof v === "object") {            // the decision's verdict is the only headline
    const s = num(v.ratio);
    return s !== null && s > 0 ? s : null;
  }
  if (r.fallback || (r.speedup_note && !r.speedup)) return null;  // too short to measure / ran plainly
  let s = num(r.speedup);
  if (s === null) {
    const e = num(r.eager_seconds), c = num(r.compiled_seconds);
    if (e !== null && c) s = e / c;
  }
  return s !== null && s > 0 ? s : null;
}

function bar(frac, cls) {
  const pct = Math.max(0, Math.min(1, frac || 0)) * 100;
  return h("span", { class: "nbaccel-bar" },
    h("span", { class: `nbaccel-bar-fill ${cls || ""}`, style: `width:${pct.toFixed(1)}%` }));
}

function badge(label, value, cls, testid) {
  return h("span", { class: `nbaccel-badge ${cls || ""}`, testid },
    label ? h("span", { class: "nbaccel-badge-label" }, label) : null, str(value));
}

function section(title, count, ...body) {
  return h("section", { class: "nbaccel-section" },
    h("h4", { class: "nbaccel-h" }, title,
      count === null ? null : h("span", { class: "nbaccel-count" }, String(count))),
    ...body);
}

// ---------------------------------------------------------------- code highlighter

const KEYWORDS = new Set(("and as assert async await break class continue def del elif else except " +
  "finally for from global if import in is lambda nonlocal not or pass raise return try while with " +
  "yield None True False prange range len float int bool").split(" "));

// comment | string | number | name | decorator
const TOKEN = new RegExp([
  /(#[^\n]*)/.source,
  /("""[\s\S]*?"""|'''[\s\S]*?'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')/.source,
  /(\b\d+(?:\.\d*)?(?:[eE][+-]?\d+)?\b|\.\d+(?:[eE][+-]?\d+)?\b)/.source,
  /([A-Za-z_][A-Za-z_0-9]*)/.source,
  /(@[A-Za-z_][\w.]*)/.source,
].join("|"), "g");

function highlight(src) {
  const frag = document.createDocumentFragment();
  let last = 0, prev = "";
  const span = (cls, text) => frag.append(h("span", { class: `nbaccel-tok-${cls}` }, text));
  for (const m of src.matchAll(TOKEN)) {
    if (m.index > last) frag.append(src.slice(last, m.index));
    const [text, comment, string, number, name, deco] = m;
    if (comment) span("comment", text);
    else if (string) span("string", text);
    else if (number) span("number", text);
    else if (deco) span("deco", text);
    else if (name && KEYWORDS.has(name)) span("keyword", text);
    else if (name && (prev === "def" || prev === "class")) span("def", text);
    else frag.append(text);
    if (name) prev = name;
    last = m.index + text.length;
  }
  if (last < src.length) frag.append(src.slice(last));
  return frag;
}

function codeBlock(title, src, testid) {
  src = src.replace(/\s+$/, "");
  const pre = h("pre", { class: "nbaccel-code", testid }, highlight(src));
  const lines = src.split("\n").length;
  return h("details", { class: "nbaccel-details" },
    h("summary", {}, title, h("span", { class: "nbaccel-muted" }, ` ${lines} line${lines === 1 ? "" : "s"}`)),
    pre);
}

// ---------------------------------------------------------------- report sections

function header(r) {
  const sp = speedupOf(r);
  const v = r.verdict && typeof r.verdict === "object" ? r.verdict : null;
  // the baseline is the user's own plain code (the verdict); the interpreter on the captured
  // graphs only where no decision ran, and then said so
  const base = r.baseline === "plain" ? "plain" : "eager (captured graphs only)";
  const word = sp === null ? "" : (sp >= 1 ? "faster" : "slower") + " than " + base;
  const verdict = r.fallback ? "ran plainly: " + r.fallback : v ? str(v.label || v.headline)
    : sp === null ? (r.speedup_note || "speedup not measured")
    : r.speedup_note ? word + "; " + r.speedup_note : word;
  const big = h("div", { class: "nbaccel-speedup-box" },
    h("span", { class: `nbaccel-speedup ${sp !== null && sp < 1 ? "nbaccel-slower" : ""}`, testid: "speedup" },
      fmtSpeedup(sp)),
    h("span", { class: "nbaccel-muted", testid: "speedup-verdict" }, verdict));

  const e = v ? num(v.plain_seconds) : num(r.eager_seconds);
  const c = v ? num(v.compiled_seconds) : num(r.compiled_seconds);
  const top = Math.max(e || 0, c || 0) || 1;
  const times = h("div", { class: "nbaccel-times" },
    ...[[v || r.baseline === "plain" ? "plain" : "eager", e, "nbaccel-fill-eager", "eager"],
        ["compiled", c, "nbaccel-fill-compiled", "compiled"]].map(([label, v, cls, id]) =>
      h("div", { class: "nbaccel-time-row", testid: `time-${id}` },
        h("span", { class: "nbaccel-time-label" }, label),
        bar((v || 0) / top, cls),
        h("span", { class: "nbaccel-time-value" }, fmtSeconds(v)))));

  const badges = h("div", { class: "nbaccel-badges" });
  if (r.cache) badges.append(badge("cache", r.cache, `nbaccel-cache-${str(r.cache).replace(/\W/g, "")}`, "cache"));
  if (r.tier) badges.append(badge("tier", r.tier, "nbaccel-tier", "tier"));
  if (r.pending_tier) {
    badges.append(h("span", { class: "nbaccel-badge nbaccel-pending", testid: "pending-tier" },
      h("span", { class: "nbaccel-spinner" }), `${r.pending_tier} compiling…`));
  }
  if (r.device) badges.append(badge("device", r.device, "nbaccel-device", "device"));
  for (const key of ["backend", "mode"]) if (r[key]) badges.append(badge(key, r[key], "nbaccel-quiet"));
  if (num(r.transfer_seconds) !== null) badges.append(badge("transfer", fmtSeconds(num(r.transfer_seconds)), "nbaccel-quiet", "transfer"));
  if (r.device_note) badges.append(h("span", { class: "nbaccel-muted", testid: "device-note" }, "device: " + str(r.device_note)));

  const title = h("div", { class: "nbaccel-title" },
    h("span", { class: "nbaccel-logo" }, "nbaccel"), h("span", { class: "nbaccel-name" }, str(r.name) || "compiled call"));
  return h("div", { class: "nbaccel-header" }, title,
    h("div", { class: "nbaccel-summary" }, big, times), badges);
}

function compileRow(r) {
  if (r.tier === "plain") return null;    // a plain run compiled nothing: no breakdown to show
  const total = num(r.compile_seconds);
  const bd = r.compile_breakdown && typeof r.compile_breakdown === "object" ? r.compile_breakdown : {};
  const keys = BREAKDOWN.filter((k) => k in bd).concat(Object.keys(bd).filter((k) => !BREAKDOWN.includes(k)));
  const parts = keys.map((k) => [k, num(bd[k])]).filter(([, v]) => v !== null && v >= 0);
  if (total === null && !parts.length) return null;
  const sum = parts.reduce((a, [, v]) => a + v, 0) || 1;
  const stack = h("span", { class: "nbaccel-stack" },
    ...parts.map(([k, v], i) => h("span", {
      class: `nbaccel-seg nbaccel-seg-${i % 6}`, style: `width:${(100 * v / sum).toFixed(1)}%`,
      title: `${k}: ${fmtSeconds(v)}`,
    })));
  const legend = h("span", { class: "nbaccel-legend" },
    ...parts.map(([k, v], i) => h("span", { class: "nbaccel-legend-item" },
      h("span", { class: `nbaccel-swatch nbaccel-seg-${i % 6}` }), `${k} ${fmtSeconds(v)}`)));
  // the jit part split into numba typing / numba lowering / llvm / cache save / other
  const obj = (x) => (x && typeof x === "object" ? x : null);
  const split = Object.entries(obj(bd.jit_split) || obj(r.jit_breakdown) || {})
    .map(([k, v]) => [k, num(v)]).filter(([, v]) => v);
  const splitLine = split.length ? h("span", { class: "nbaccel-muted", testid: "jit-split" },
    "jit: " + split.map(([k, v]) => `${k} ${fmtSeconds(v)}`).join(" · ")) : null;
  return h("div", { class: "nbaccel-compile", testid: "compile" },
    h("span", { class: "nbaccel-time-label" }, "compile"),
    h("span", { class: "nbaccel-compile-total" }, fmtSeconds(total ?? sum)),
    parts.length ? stack : null, parts.length ? legend : null, splitLine);
}

function sparkline(r) {
  const hist = list(r.history, "cache").slice(-20);
  const pts = hist.map((x) => num(x.compiled_seconds));
  if (!pts.some((v) => v !== null)) return null;
  const W = 120, H = 24, max = Math.max(...pts.filter((v) => v !== null)) || 1;
  const step = pts.length > 1 ? W / (pts.length - 1) : 0;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `-2 -2 ${W + 4} ${H + 4}`);
  svg.setAttribute("class", "nbaccel-spark");
  svg.setAttribute("aria-label", "compiled time of the last runs");
  const coords = pts.map((v, i) => (v === null ? null : [i * step, H - (H * v) / max]));
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", coords.filter(Boolean).map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" "));
  svg.append(line);
  coords.forEach((p, i) => {
    if (!p) return;
    const dot = document.createElementNS(ns, "circle");
    dot.setAttribute("cx", p[0].toFixed(1));
    dot.setAttribute("cy", p[1].toFixed(1));
    dot.setAttribute("r", "2");
    dot.setAttribute("class", `nbaccel-spark-dot nbaccel-spark-${str(hist[i].cache).replace(/\W/g, "")}`);
    const t = document.createElementNS(ns, "title");
    t.textContent = `run ${i + 1}: ${fmtSeconds(pts[i])}${hist[i].cache ? ` (${hist[i].cache})` : ""}`;
    dot.append(t);
    svg.append(dot);
  });
  const lastRuns = pts.slice(-5).map(fmtSeconds).join(" · ");
  return h("div", { class: "nbaccel-history", testid: "history" },
    h("span", { class: "nbaccel-time-label" }, "last runs"), svg,
    h("span", { class: "nbaccel-muted nbaccel-small" }, lastRuns));
}

function recompiles(r) {
  const recs = list(r.recompiles, "reason");
  const dyn = strs(r.dynamic_dims);
  if (!recs.length && !dyn.length) return null;
  const ol = h("ol", { class: "nbaccel-list" },
    ...recs.map((rec) => h("li", {},
      h("span", { testid: "recompile-reason" }, str(rec.reason) || "(no reason recorded)"),
      ...strs(rec.dynamic_dims).map((d) => h("span", { class: "nbaccel-badge nbaccel-dynamic" }, `dynamic ${d}`)))));
  return section("Recompilations", recs.length, recs.length ? ol : null,
    dyn.length ? h("div", { class: "nbaccel-small" }, h("span", { class: "nbaccel-muted" }, "dynamic dims now: "),
      ...dyn.map((d) => h("code", { class: "nbaccel-dynamic-dim", testid: "dynamic-dim" }, d))) : null);
}

function graphBreaks(r) {
  const breaks = list(r.graph_breaks, "reason");
  if (!breaks.length) return null;
  return section("Graph breaks", breaks.length, ...breaks.map((b) => {
    const where = [str(b.filename), b.lineno !== undefined && b.lineno !== null ? `line ${b.lineno}` : ""]
      .filter(Boolean).join(" ");
    return h("div", { class: "nbaccel-break", testid: "graph-break" },
      h("div", { class: "nbaccel-break-where" },
        where ? h("span", { class: "nbaccel-lineno", testid: "graph-break-line" }, where) : null,
        b.line ? h("code", { class: "nbaccel-break-src" }, highlight(str(b.line).trim())) : null),
      b.reason ? h("div", { class: "nbaccel-break-reason" }, str(b.reason)) : null,
      b.fix ? h("div", { class: "nbaccel-fix" }, h("b", {}, "fix "), str(b.fix)) : null);
  }));
}

function kernelTable(r) {
  const ks = list(r.kernels, "name");
  if (!ks.length) return null;
  const total = ks.reduce((a, k) => a + (num(k.seconds) || 0), 0);
  const rows = ks.map((k) => {
    const ops = strs(k.ops), sec = num(k.seconds);
    const share = sec !== null && total > 0 ? sec / total : null;
    return h("tr", { testid: "kernel-row" },
      h("td", {}, h("code", { class: "nbaccel-kname" }, str(k.name))),
      h("td", { testid: "kernel-ranges" }, h("code", {}, str(k.ranges))),
      h("td", { class: "nbaccel-ops" }, h("span", { class: "nbaccel-opcount" }, String(ops.length)),
        h("span", { class: "nbaccel-muted" }, ops.join(", "))),
      h("td", {}, h("span", { class: `nbaccel-badge nbaccel-dev-${str(k.device).replace(/\W/g, "")}`, testid: "kernel-device" },
        str(k.device) || "?")),
      h("td", { testid: "kernel-backend" }, str(k.backend)),
      h("td", { class: "nbaccel-num" }, fmtSeconds(sec)),
      h("td", { class: "nbaccel-share" }, share === null ? "" : [bar(share, "nbaccel-fill-compiled"),
        h("span", { class: "nbaccel-small" }, `${Math.round(100 * share)}%`)]));
  });
  const head = h("tr", {}, ...["kernel", "ranges", "ops", "device", "backend", "time", "share"].map((t) => h("th", {}, t)));
  return section("Device placement", ks.length,
    h("div", { class: "nbaccel-table-wrap" },
      h("table", { class: "nbaccel-table", testid: "kernels" }, h("thead", {}, head), h("tbody", {}, ...rows))));
}

// replaceChildren(null) would insert the text "null": leave absent sections out
const fill = (root, ...kids) => root.replaceChildren(...kids.filter((k) => k !== null && k !== undefined));

function renderReport(root, r) {
  r = r && typeof r === "object" ? r : {};
  fill(root,
    header(r), compileRow(r), sparkline(r), recompiles(r), graphBreaks(r), kernelTable(r),
    r.graph ? codeBlock("Captured graph", str(r.graph), "graph") : null,
    r.code ? codeBlock("Generated code", str(r.code), "code") : null);
}

// ---------------------------------------------------------------- progress and dashboard

function renderProgress(root, message) {
  root.replaceChildren(
    h("div", { class: "nbaccel-progress", testid: "progress" },
      h("span", { class: "nbaccel-logo" }, "nbaccel"),
      h("span", { class: "nbaccel-progress-msg" }, str(message) || "compiling…"),
      h("span", { class: "nbaccel-progress-track" }, h("span", { class: "nbaccel-progress-runner" }))));
}

function savedSeconds(c) {
  return num(c.saved_seconds);   // the decision's own figure (compiler/replay/decision.py): no arithmetic here
}

function renderDashboard(root, st) {
  st = st && typeof st === "object" ? st : {};
  const cells = list(st.cells, "name");
  const saved = cells.map(savedSeconds).filter((v) => v !== null);
  const total = saved.length ? saved.reduce((a, b) => a + b, 0) : null;
  const rows = cells.map((c) => h("tr", { testid: "dashboard-row" },
    h("td", {}, h("code", {}, str(c.name))),
    h("td", { class: "nbaccel-num nbaccel-strong" }, fmtSpeedup(speedupOf(c))),
    h("td", { class: "nbaccel-num" }, String(Array.isArray(c.recompiles) ? c.recompiles.length : num(c.recompiles) ?? 0)),
    h("td", { class: "nbaccel-num" }, String(num(c.calls) ?? 0)),
    h("td", {}, c.tier ? badge("", c.tier, "nbaccel-tier") : "")));
  const head = h("tr", {}, ...["cell", "speedup", "recompiles", "calls", "tier"].map((t) => h("th", {}, t)));
  const savedText = total === null ? "—" : total >= 0 ? fmtSeconds(total) : `−${fmtSeconds(-total)}`;
  fill(root,
    h("div", { class: "nbaccel-header" },
      h("div", { class: "nbaccel-title" }, h("span", { class: "nbaccel-logo" }, "nbaccel"),
        h("span", { class: "nbaccel-name" }, `status · ${cells.length} compiled cell${cells.length === 1 ? "" : "s"}`)),
      h("div", { class: "nbaccel-speedup-box" },
        h("span", { class: "nbaccel-speedup", testid: "time-saved" }, savedText),
        h("span", { class: "nbaccel-muted" }, "time saved (net of compile time)"))),
    cells.length ? h("div", { class: "nbaccel-table-wrap" },
      h("table", { class: "nbaccel-table", testid: "dashboard" }, h("thead", {}, head), h("tbody", {}, ...rows))) : null,
    h("div", { class: "nbaccel-badges" },
      ...strs(st.backends).map((b) => badge("backend", b, "nbaccel-quiet")),
      ...strs(st.devices).map((d) => badge("device", d, "nbaccel-device"))),
    st.cache_dir ? h("div", { class: "nbaccel-small" }, h("span", { class: "nbaccel-muted" }, "cache "),
      h("code", {}, str(st.cache_dir)), num(st.cache_bytes) !== null ? ` (${fmtBytes(st.cache_bytes)})` : "") : null);
}

// ---------------------------------------------------------------- anywidget entry point

function render({ model, el }) {
  const root = h("div", { class: "nbaccel-root nbaccel-widget" });
  el.append(root);
  const draw = () => {
    const kind = model.get("kind") || "report";
    root.dataset.kind = kind;
    try {
      if (kind === "progress") renderProgress(root, model.get("message"));
      else if (kind === "dashboard") renderDashboard(root, model.get("status"));
      else renderReport(root, model.get("report"));
    } catch (err) {
      // a malformed report must not leave an empty output
      root.replaceChildren(h("div", { class: "nbaccel-error" }, `nbaccel: could not render the report (${err})`));
    }
  };
  const events = ["change:kind", "change:report", "change:message", "change:status"];
  for (const ev of events) model.on(ev, draw);
  draw();
  return () => { for (const ev of events) model.off(ev, draw); };
}

export default { render };

// Sextant playground: one request to this server, its answer drawn as cards, tables and a
// chart. No framework, no inline code (the page's CSP allows only this file), and every
// piece of text from the server is set with textContent, never parsed as HTML.
//
// Offsets: the API counts characters as Unicode scalar values, and JavaScript strings count
// UTF-16 units, so every slice by `charStart`/`charEnd` goes through `Array.from(text)`.
"use strict";

const $ = (id) => document.getElementById(id);

/** Creates an element with a class and children (strings become text nodes). */
function el(tag, cls, ...children) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === "string" || typeof c === "number" ? String(c) : c);
  }
  return e;
}

/** Creates an SVG element with attributes. */
function svg(tag, attrs, ...children) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of children) e.append(c);
  return e;
}

/** Slices `text` by characters (Unicode scalar values), as the API counts them. */
function chars(text) {
  return Array.from(text);
}

/** The character offset (scalar values) of `needle` in `hay`, or -1. */
function charIndexOf(hay, needle) {
  const i = hay.indexOf(needle);
  return i < 0 ? -1 : chars(hay.slice(0, i)).length;
}

const page = {
  defaultIndex: "demo",
  // The index the shown answer read.
  answered: "demo",
  // Documents fetched for this answer, by index and id (a promise each).
  documents: new Map(),
};

function endpoint() {
  return $("endpoint").value;
}

/** Shows only the fields the chosen endpoint reads. */
function syncForm() {
  const ep = endpoint();
  for (const e of document.querySelectorAll(".only-search")) e.hidden = ep !== "search";
  for (const e of document.querySelectorAll(".only-kb")) e.hidden = ep !== "kb";
  for (const e of document.querySelectorAll(".only-meta")) e.hidden = !(ep === "search" || ep === "retrieve");
  const index = $("index");
  if (ep === "context") {
    index.value = page.defaultIndex;
    index.disabled = true;
    index.title = "/v1/context reads the server's default index";
  } else {
    index.disabled = false;
    index.title = "";
  }
  $("year").disabled = ep === "search" || ep === "kb";
  $("quarter").disabled = ep === "search" || ep === "kb";
}

function list(text) {
  return text.split(",").map((s) => s.trim()).filter((s) => s.length > 0);
}

/** Parses a JSON field of the form, naming it on error. */
function jsonField(id, name) {
  const text = $(id).value.trim();
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${name} is not JSON: ${e.message}`);
  }
}

/** The path and body of the request the form describes. */
function request() {
  const ep = endpoint();
  const query = $("query").value.trim();
  const topk = Number($("topk").value) || 5;
  const tickers = list($("tickers").value);
  const year = $("year").value ? Number($("year").value) : undefined;
  const quarter = $("quarter").value || undefined;
  const types = Array.from(document.querySelectorAll(".stype:checked")).map((c) => c.value);
  const metadata = jsonField("metadata", "The metadata filter");
  if (ep === "search") {
    const body = { query, index: $("index").value, limit: topk };
    if (tickers.length) body.entity = tickers;
    if (types.length) body.theme = types;
    if ($("after").value) body.published_after = $("after").value;
    if ($("before").value) body.published_before = $("before").value;
    if (metadata !== undefined) body.metadata = metadata;
    return { path: "/v1/search", body };
  }
  if (ep === "retrieve") {
    const filters = {};
    if (tickers.length) filters.tickers = tickers;
    if (year !== undefined) filters.year = year;
    if (quarter) filters.quarter = quarter;
    if (types.length) filters.source_types = types;
    if (metadata !== undefined) filters.metadata = metadata;
    return { path: "/v1/retrieve", body: { query, index: $("index").value, top_k: topk, include_segments: true, filters } };
  }
  if (ep === "context") {
    const body = { question: query, top_k: topk };
    if (tickers.length) body.tickers = tickers;
    if (year !== undefined) body.years = [year];
    if (quarter) body.quarters = [quarter];
    return { path: "/v1/context", body };
  }
  const body = { IndexId: $("index").value, Query: query, RerankTopN: topk };
  const sf = jsonField("searchfilters", "SearchFilters");
  const simple = {};
  if (tickers.length === 1) simple.ticker = tickers[0];
  if (types.length === 1) simple.documentType = types[0];
  if (sf !== undefined) body.SearchFilters = sf;
  else if (Object.keys(simple).length) body.SearchFilters = [simple];
  return { path: "/ws_playground/index/retrieve", body };
}

/** Sends `body` to `path` with the key typed in the page. */
async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const key = $("key").value.trim();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let json = null;
  try {
    json = await resp.json();
  } catch (_) {
    json = null;
  }
  return { status: resp.status, json };
}

/** The document's text (fetched once per answer), or null when this key cannot read it. */
function documentText(index, id) {
  const k = `${index}\u0000${id}`;
  if (!page.documents.has(k)) {
    const path = `/v1/indexes/${encodeURIComponent(index)}/documents/${encodeURIComponent(id)}`;
    page.documents.set(
      k,
      call("GET", path).then((r) => (r.status === 200 && r.json && typeof r.json.text === "string" ? r.json.text : null)),
    );
  }
  return page.documents.get(k);
}

function banner(kind, text) {
  $("banners").append(el("div", `banner ${kind}`, text));
}

function clear() {
  for (const id of ["banners", "timings", "output"]) $(id).replaceChildren();
  $("raw").textContent = "";
  page.documents = new Map();
}

/** The stage timings as bars (milliseconds). */
function drawTimings(timings, title) {
  const entries = Object.entries(timings || {}).filter(([, v]) => typeof v === "number");
  if (!entries.length) return;
  const max = Math.max(...entries.map(([, v]) => v), 0.001);
  const table = el("table", "timings");
  table.append(el("caption", null, title || "Stage timings (ms)"));
  for (const [stage, ms] of entries) {
    const bar = el("span", "bar");
    bar.style.width = `${Math.max(1, (100 * ms) / max)}%`;
    table.append(el("tr", null, el("th", null, stage), el("td", "num", ms.toFixed(1)), el("td", "barcell", bar)));
  }
  $("timings").append(table);
}

/**
 * A view of a document's text with characters [start, end) marked: `context` characters
 * each side, and a button to show the whole document.
 */
function docView(text, start, end, context) {
  const cs = chars(text);
  const box = el("div", "doc");
  const render = (ctx) => {
    const s = Math.max(0, start - ctx);
    const e = Math.min(cs.length, end + ctx);
    const mark = el("mark", "evidence", cs.slice(start, end).join(""));
    mark.dataset.charStart = String(start);
    mark.dataset.charEnd = String(end);
    box.replaceChildren(
      s > 0 ? "… " : "",
      cs.slice(s, start).join(""),
      mark,
      cs.slice(end, e).join(""),
      e < cs.length ? " …" : "",
    );
  };
  render(context);
  const whole = el("button", "link", "Whole document");
  whole.type = "button";
  whole.addEventListener("click", () => {
    render(cs.length);
    whole.remove();
    const m = box.querySelector("mark");
    if (m) box.scrollTop = Math.max(0, m.offsetTop - box.offsetTop - 40);
  });
  return el("div", "docwrap", box, cs.length > end + context || start > context ? whole : null);
}

/**
 * Fills `slot` with the document view, once the document is fetched: the span [start, end)
 * of document `id`. Without access to the document, the span is shown in `fallbackText`
 * (the chunk), found by its text.
 */
function fillDoc(slot, index, id, start, end, cited, fallbackText) {
  slot.replaceChildren(el("div", "muted", "loading the document…"));
  documentText(index, id).then((text) => {
    if (text !== null && Number.isInteger(start) && Number.isInteger(end) && end <= chars(text).length) {
      slot.replaceChildren(docView(text, start, end, 320));
      return;
    }
    const at = cited ? charIndexOf(fallbackText, cited) : -1;
    if (at >= 0) {
      slot.replaceChildren(docView(fallbackText, at, at + chars(cited).length, 320));
    } else {
      slot.replaceChildren(el("div", "doc", fallbackText));
    }
    slot.prepend(el("div", "muted", "(the document is not readable with this key: shown within its chunk)"));
  });
}

function badges(fields) {
  const b = el("div", "badges");
  for (const f of fields) if (f !== null && f !== undefined && f !== "") b.append(el("span", "badge", String(f)));
  return b;
}

/** A table of the path ranks (`—` where the path did not return the result). */
function ranks(d) {
  const cell = (v, digits) => (v === null || v === undefined ? "—" : digits ? Number(v).toFixed(digits) : String(v));
  const t = el("table", "ranks");
  t.append(
    el("tr", null, ...["dense", "SPLADE", "BM25", "fused", "reranker", "reranker score"].map((h) => el("th", null, h))),
    el(
      "tr",
      null,
      el("td", null, cell(d.dense_rank)),
      el("td", null, cell(d.sparse_rank)),
      el("td", null, cell(d.bm25_rank)),
      el("td", null, cell(d.rrf_rank)),
      el("td", null, cell(d.rerank_rank)),
      el("td", null, cell(d.rerank_score, 4)),
    ),
  );
  return t;
}

function card(n, title, score) {
  const c = el("article", "result");
  c.append(el("h3", null, el("span", "rank", `${n}.`), " ", title || "(untitled)", el("span", "score", `score ${Number(score).toFixed(4)}`)));
  return c;
}

function drawSearch(json) {
  const meta = json.meta || {};
  if (meta.degraded) banner("warn", `Degraded: served by ${(meta.paths_served || []).join(", ")} while the other paths build.`);
  if (meta.rerank && meta.rerank.status === "failed") banner("warn", "The reranker failed: results are in fused order.");
  for (const [p, why] of Object.entries(meta.failed_paths || {})) banner("warn", `Path ${p} failed: ${why}`);
  drawTimings(meta.timings);
  const results = json.results || [];
  if (!results.length) $("output").append(el("p", "muted", "No results."));
  results.forEach((r, i) => {
    const doc = r.document || {};
    const pos = r.position || {};
    const c = card(i + 1, doc.title, r.score);
    c.dataset.documentId = doc.document_id;
    c.append(badges([doc.document_id, doc.document_type, doc.ticker, doc.year, doc.quarter, doc.published_at, r.unit_id]));
    c.append(el("blockquote", "cited", r.text));
    c.append(ranks(r.diagnostics || {}));
    const slot = el("div", "docslot");
    c.append(slot);
    $("output").append(c);
    fillDoc(slot, page.answered, doc.document_id, pos.char_start, pos.char_end, r.text, pos.chunk_text || r.text);
  });
}

function drawRetrieve(json) {
  const meta = json.meta || {};
  const pm = meta.periodMismatch;
  if (pm) banner("warn", `Period mismatch: ${pm.message} (asked ${pm.requested}; served ${(pm.served || []).join(", ")})`);
  if (meta.degraded) banner("warn", `Degraded: served by ${(meta.pathsServed || []).join(", ")} while the other paths build.`);
  if (meta.rerank && meta.rerank.status === "failed") banner("warn", "The reranker failed: results are in fused order.");
  drawTimings(meta.timings);
  const chunks = json.chunks || [];
  if (!chunks.length) $("output").append(el("p", "muted", "No results."));
  chunks.forEach((ch, i) => {
    const s = ch.source || {};
    const c = card(i + 1, s.documentTitle, ch.score);
    c.dataset.documentId = s.documentId;
    c.append(badges([s.documentId, s.documentType, s.ticker, s.year, s.quarter, `chars ${s.charStart}-${s.charEnd}`]));
    const cited = ch.evidenceText || ch.text;
    c.append(el("blockquote", "cited", cited));
    const slot = el("div", "docslot");
    c.append(slot);
    $("output").append(c);
    // The evidence lies inside the chunk: its place in the document is the chunk's start
    // plus its place in the chunk.
    const within = charIndexOf(ch.text, cited);
    const start = within >= 0 ? s.charStart + within : s.charStart;
    const end = within >= 0 ? start + chars(cited).length : s.charEnd;
    fillDoc(slot, page.answered, s.documentId, start, end, cited, ch.text);
  });
}

function drawKb(json) {
  if (!json.Success) {
    banner("error", `${json.Code}: ${json.Message}`);
    return;
  }
  const data = json.Data || {};
  if (data.RewrittenQuery) banner("info", `Rewritten query: ${data.RewrittenQuery}`);
  const nodes = data.Nodes || [];
  if (!nodes.length) $("output").append(el("p", "muted", "No results."));
  nodes.forEach((n, i) => {
    const m = n.Metadata || {};
    const c = card(i + 1, m.title, n.Score);
    c.dataset.documentId = m.doc_id;
    c.append(badges([m.doc_id, m.documentType, m.ticker, m.year, m.quarter, `chars ${m.charStart}-${m.charEnd}`]));
    c.append(el("blockquote", "cited", n.Text));
    const slot = el("div", "docslot");
    c.append(slot);
    $("output").append(c);
    fillDoc(slot, page.answered, m.doc_id, m.charStart, m.charEnd, n.Text, n.Text);
  });
}

function table(caption, headers, rows) {
  const t = el("table", "data");
  t.append(el("caption", null, caption));
  t.append(el("tr", null, ...headers.map((h) => el("th", null, h))));
  for (const r of rows) t.append(el("tr", null, ...r.map((v) => el("td", typeof v === "number" ? "num" : null, v === null || v === undefined ? "—" : String(v)))));
  return t;
}

/** A small line chart of one series' values by period (SVG, no script beyond this file). */
function seriesChart(series) {
  const pts = (series.points || []).filter((p) => typeof p.value === "number");
  const W = 440, H = 180, L = 70, R = 36, T = 24, B = 34;
  const chart = svg("svg", { class: "series", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img" });
  chart.append(svg("title", {}, `${series.ticker} ${series.metric}`));
  if (!pts.length) return chart;
  const vals = pts.map((p) => p.value);
  let lo = Math.min(...vals, 0), hi = Math.max(...vals);
  if (hi === lo) hi = lo + 1;
  const x = (i) => L + (pts.length === 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (pts.length - 1));
  const y = (v) => T + ((hi - v) * (H - T - B)) / (hi - lo);
  chart.append(svg("line", { x1: L, y1: y(lo), x2: W - R, y2: y(lo), class: "axis" }));
  chart.append(svg("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }));
  const label = (v) => (Math.abs(v) >= 1e9 ? `${(v / 1e9).toFixed(1)} B` : Math.abs(v) >= 1e6 ? `${(v / 1e6).toFixed(1)} M` : v.toFixed(2));
  for (const v of [lo, hi]) chart.append(svg("text", { x: L - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" }, label(v)));
  chart.append(svg("polyline", { points: pts.map((p, i) => `${x(i)},${y(p.value)}`).join(" "), class: "line" }));
  pts.forEach((p, i) => {
    chart.append(svg("circle", { cx: x(i), cy: y(p.value), r: 3.5, class: "dot" }, svg("title", {}, `${p.periodLabel}: ${p.display}`)));
    chart.append(svg("text", { x: x(i), y: H - B + 18, class: "tick", "text-anchor": "middle" }, p.periodLabel));
  });
  chart.append(svg("text", { x: L, y: 14, class: "ctitle" }, `${series.ticker} · ${series.metric} (${pts[0].unit})`));
  return chart;
}

function factRow(v) {
  const src = v.source || {};
  return [v.ticker, v.label || v.metric, v.periodLabel, v.display, v.concept, [src.form, src.filing, src.file].filter(Boolean).join(" · ")];
}

function drawContext(json) {
  const meta = json.meta || {};
  for (const w of json.warnings || []) banner("warn", w);
  for (const g of json.guardrails || []) banner("info", `Guardrail: ${g}`);
  for (const c of json.contradictions || []) banner("contradiction", `Contradiction (${c.kind}, ${c.ticker}): ${c.explanation}`);
  if (meta.degraded) banner("warn", `Degraded: served by ${(meta.pathsServed || []).join(", ")} while the other paths build.`);
  drawTimings({ total: meta.tookMs }, "Time (ms)");
  const out = $("output");
  const conf = json.confidence || {};
  out.append(el("p", "route", `Route: ${json.route} · confidence ${conf.score} (${conf.tier})`));
  const r = json.result || {};
  if ((r.facts || []).length) out.append(table("Facts", ["company", "metric", "period", "value", "concept", "source"], r.facts.map(factRow)));
  if ((r.comparisons || []).length)
    out.append(table("Year over year", ["company", "metric", "period", "prior", "change"], r.comparisons.map((c) => [c.ticker, c.metric, c.period, c.priorPeriod, c.display])));
  for (const s of r.timeseries || []) {
    const box = el("div", "seriesbox");
    box.append(seriesChart(s));
    box.append(table(`${s.ticker} ${s.metric}`, ["period", "value", "source"], (s.points || []).map((p) => [p.periodLabel, p.display, (p.source || {}).file])));
    if ((s.missing || []).length) box.append(el("p", "muted", `Missing: ${s.missing.join(", ")}`));
    out.append(box);
  }
  for (const st of r.statements || []) {
    out.append(
      table(
        `${st.ticker} ${st.statement.replace(/_/g, " ")} ${st.period}`,
        ["line", "value", "a year earlier"],
        (st.lines || []).map((l) => [l.value ? l.value.label || l.metric : l.metric, l.value ? l.value.display : null, l.prior ? l.prior.display : null]),
      ),
    );
  }
  (r.passages || []).forEach((p, i) => {
    const c = card(i + 1, p.title, p.score);
    c.append(badges([p.documentId, p.documentType, p.ticker, p.year, p.quarter, p.chunkId]));
    c.append(el("blockquote", "cited", p.text));
    out.append(c);
  });
}

async function run(ev) {
  ev.preventDefault();
  clear();
  let req;
  try {
    req = request();
  } catch (e) {
    banner("error", e.message);
    return;
  }
  if (!(req.body.query || req.body.question || req.body.Query)) {
    banner("error", "Type a question first.");
    return;
  }
  $("status").textContent = "…";
  $("run").disabled = true;
  // The index whose documents the answer cites.
  page.answered = endpoint() === "context" ? page.defaultIndex : $("index").value;
  const started = performance.now();
  try {
    const { status, json } = await call("POST", req.path, req.body);
    const ms = performance.now() - started;
    $("status").textContent = `${status} in ${ms.toFixed(0)} ms`;
    $("raw").textContent = `POST ${req.path}\n${JSON.stringify(req.body, null, 2)}\n\n${JSON.stringify(json, null, 2)}`;
    if (json && json.error) {
      const e = json.error;
      banner("error", `${status} ${e.code}: ${e.message}${e.field ? ` (field: ${e.field})` : ""}`);
      return;
    }
    if (!json) {
      banner("error", `${status}: the answer is not JSON`);
      return;
    }
    const ep = endpoint();
    if (ep === "search") drawSearch(json);
    else if (ep === "retrieve") drawRetrieve(json);
    else if (ep === "context") drawContext(json);
    else drawKb(json);
  } catch (e) {
    banner("error", `The request failed: ${e.message}`);
  } finally {
    $("run").disabled = false;
    document.body.dataset.state = "done";
  }
}

/** Fills the index picker: the indexes the typed key may read (`GET /v1/indexes`), or
 * without a key those `/health` names; the choice is kept when it is still listed. */
async function loadIndexes(health) {
  const select = $("index");
  const kept = select.value;
  let entries = [];
  if ($("key").value.trim()) {
    const { json } = await call("GET", "/v1/indexes");
    if (json && json.indexes) {
      entries = json.indexes.map((i) => [i.index, `${i.index} (${i.documents} documents${i.state === "ready" ? "" : ", building"})`]);
    }
  }
  if (!entries.length && health && health.indexes) {
    entries = Object.entries(health.indexes).map(([id, n]) => [id, `${id} (${n} chunks)`]);
  }
  if (!entries.length) return;
  select.replaceChildren(
    ...entries.map(([id, label]) => {
      const o = el("option", null, label);
      o.value = id;
      return o;
    }),
  );
  select.value = entries.some(([id]) => id === kept) ? kept : page.defaultIndex;
  syncForm();
}

async function init() {
  $("endpoint").addEventListener("change", syncForm);
  $("ask").addEventListener("submit", run);
  $("key").addEventListener("change", () => loadIndexes(null));
  try {
    const { json } = await call("GET", "/health");
    if (json && json.indexes) {
      page.defaultIndex = json.defaultIndex || Object.keys(json.indexes)[0] || "demo";
      await loadIndexes(json);
      if (json.degraded) banner("info", "Some paths are still building; answers say which paths served them.");
    } else if (json && json.error) {
      banner("warn", json.error.message);
    }
  } catch (e) {
    banner("error", `The server did not answer /health: ${e.message}`);
  }
  syncForm();
  document.body.dataset.state = "ready";
}

document.addEventListener("DOMContentLoaded", init);

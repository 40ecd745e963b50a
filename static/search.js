// The search page (static/index.html): runs the search, renders hits, their explanations and
// the reranker's features. A file rather than an inline script, so the page can be served with
// a Content-Security-Policy that forbids inline script (src/api/mod.rs).
"use strict";
const $ = (id) => document.getElementById(id);
/** The fused models of the "RRF" first phase, and what "collapse similar" groups by. */
const FUSION_INPUTS = "bm25f,lm,bm25prox";
const COLLAPSE = "page,near_duplicate";
/** Reranker features shown before "all features" is opened. */
const TOP_FEATURES = 12;

function node(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

const num = (v) => (typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toPrecision(4)) : String(v));

function syncSwitches() {
  // A static boost re-sorts the first phase; the API refuses it together with reranking.
  const boost = $("boost").checked;
  $("rerank").disabled = boost;
  $("rerank-label").setAttribute("aria-disabled", String(boost));
}

function showError(message) {
  $("meta").textContent = "";
  $("hits").replaceChildren(node("p", { class: "error", id: "error" }, message));
}

async function search(ev) {
  if (ev) ev.preventDefault();
  const q = $("q").value.trim();
  if (!q) return;
  const params = new URLSearchParams({ q, k: "20", model: $("model").value, explain: "true" });
  if ($("model").value === "fusion") {
    params.set("inputs", FUSION_INPUTS);
    params.set("fusion", "rrf");
  }
  // Collapsing is on unless unticked: translated copies and re-exported pages are one result.
  params.set("collapse", $("collapse").checked ? COLLAPSE : "none");
  if ($("boost").checked) {
    params.set("boost", "pagerank");
    params.set("rerank", "false");
  } else {
    params.set("rerank", String($("rerank").checked));
  }
  history.replaceState(null, "", "?" + params.toString());
  let resp, body;
  try {
    resp = await fetch("/search?" + params.toString());
    body = await resp.json();
  } catch (e) {
    showError(`search failed: ${e.message}`);
    return;
  }
  if (!resp.ok) {
    const err = body && body.error;
    showError(err ? `${err.message}${err.field ? ` (${err.field})` : ""}` : resp.statusText);
    return;
  }
  const meta = [`${body.total_hits} matching documents, ${body.took_ms.toFixed(1)} ms, first phase ${body.model}, `];
  if (body.reranker) meta.push("reranked by ", node("span", { class: "reranker", id: "reranker" }, body.reranker));
  else meta.push(node("span", { id: "reranker" }, $("rerank").checked && !$("boost").checked ? "no reranker active" : "not reranked"));
  $("meta").replaceChildren(...meta);
  $("hits").replaceChildren(...body.hits.map((h) => renderHit(h, body.query_id)));
  if (body.hits.length === 0) $("hits").append(node("p", {}, "No documents match."));
}

/**
 * The URL a result may link to: only http(s). A document's `url` is whatever was ingested, and
 * a `javascript:` or `data:` link would run script on rankd's origin (which also serves
 * /admin); such URLs are shown as text instead.
 */
function safeHref(url) {
  if (typeof url !== "string" || url === "") return null;
  try {
    const u = new URL(url);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch {
    return null;
  }
}

/**
 * Tells rankd that hit `h` of the answer `queryId` was clicked (`POST /events`, docs/GUIDE.md).
 * A beacon outlives the page the click leaves; the server counts the click against the
 * impression the answer logged.
 */
function reportClick(queryId, h) {
  if (!queryId || !navigator.sendBeacon) return;
  const event = { action_name: "click", query_id: queryId, object_id: h.id, position: h.rank, timestamp: Date.now() };
  navigator.sendBeacon("/events", JSON.stringify(event));
}

function renderHit(h, queryId) {
  const href = safeHref(h.url);
  const a = href
    ? node("a", { href }, h.title || h.id)
    : node("span", { class: "title", title: "no http(s) link for this document" }, h.title || h.id);
  // A left click and a middle click (new tab) both open the result.
  if (href) {
    a.addEventListener("click", () => reportClick(queryId, h));
    a.addEventListener("auxclick", (ev) => { if (ev.button === 1) reportClick(queryId, h); });
  }
  const line = node("div", { class: "url" }, `${h.rank}. ${h.url || h.id} — score ${h.score.toFixed(3)} `);
  const e = h.explain || {};
  if (Number.isInteger(e.first_phase_rank) && e.first_phase_rank !== h.rank) {
    const up = e.first_phase_rank > h.rank;
    line.append(node("span", { class: `move ${up ? "up" : "down"}`, title: `rank ${e.first_phase_rank} in the first phase` },
      `${up ? "▲" : "▼"} ${Math.abs(e.first_phase_rank - h.rank)}`));
  }
  const snip = node("div", { class: "snippet" });
  snip.innerHTML = h.snippet || "";  // rankd escapes the text and adds only <b> tags
  const div = node("div", { class: "hit" }, a, line, snip);
  if (h.collapsed > 0) {
    div.append(node("div", { class: "collapsed" },
      `${h.collapsed} similar result${h.collapsed === 1 ? "" : "s"} hidden`));
  }
  if (h.explain) div.append(renderExplain(h));
  return div;
}

function renderExplain(h) {
  const e = h.explain;
  const det = node("details", { class: "explain" }, node("summary", {}, e.reranker ? "why this rank" : "why this score"));
  const panel = node("div", { class: "panel" });
  if (e.reranker) {
    panel.append(node("p", {},
      `Reranker ${e.reranker} scored ${num(e.rerank_score)}; first-phase rank ${e.first_phase_rank}, now rank ${h.rank}.` +
      (typeof e.base_score === "number" && e.contributions
        ? ` The contributions below add to a base of ${num(e.base_score)} (the model's bias or expected score).`
        : "")));
    panel.append(...featureTables(e));
  }
  if (Array.isArray(e.fusion_inputs)) {
    panel.append(node("p", {}, "Fused from: " + e.fusion_inputs
      .map((i) => `${i.model} ${i.rank ? `rank ${i.rank}` : "not in its top 100"}`).join(", ") + "."));
  }
  if (e.boost) {
    panel.append(node("p", {},
      `First-phase score ${num(e.first_phase_score)} (rank ${e.first_phase_rank}) plus the PageRank boost ${num(e.boost.added)} (λ ${num(e.boost.weight)}).`));
  }
  const first = e.first_phase;
  const score = first && first.description !== undefined
    ? [node("h4", {}, e.reranker ? "First-phase score" : "Score"), tree(first)]
    : [];
  const links = e.links ? [node("h4", {}, "Link scores"), linkTable(e.links)] : [];
  // Without a reranker the score is the first-phase one: it comes first.
  panel.append(...(e.reranker ? [...links, ...score] : [...score, ...links]));
  det.append(panel);
  return det;
}

/** The reranker's features, by |contribution| for linear models, else by |value|. */
function featureTables(e) {
  const contrib = e.contributions || null;
  const rows = Object.entries(e.features || {}).map(([name, value]) => ({
    name, value, c: contrib ? contrib[name] : null,
  }));
  const key = (r) => Math.abs(contrib ? r.c : r.value);
  rows.sort((x, y) => key(y) - key(x) || x.name.localeCompare(y.name));
  const maxMag = Math.max(1e-12, ...rows.map(key));
  const table = (list) => {
    const head = node("tr", {}, node("th", {}, "feature"), node("th", {}, "value"));
    if (contrib) head.append(node("th", {}, "contribution"), node("th", {}, ""));
    const t = node("table", { class: "features" }, head);
    for (const r of list) {
      const tr = node("tr", {}, node("td", { class: "name" }, r.name), node("td", { class: "num" }, num(r.value)));
      if (contrib) {
        const width = Math.round((Math.abs(r.c) / maxMag) * 120);
        tr.append(node("td", { class: "num" }, num(r.c)),
          node("td", {}, node("span", { class: `bar ${r.c < 0 ? "neg" : "pos"}`, style: `width:${width}px` })));
      }
      t.append(tr);
    }
    return t;
  };
  const title = contrib ? "Features by contribution to the rerank score" : "Features (by magnitude)";
  const out = [node("h4", {}, title), table(rows.slice(0, TOP_FEATURES))];
  if (rows.length > TOP_FEATURES) {
    out.push(node("details", {}, node("summary", {}, `all ${rows.length} features`), table(rows.slice(TOP_FEATURES))));
  }
  return out;
}

function linkTable(links) {
  const t = node("table", { class: "links" });
  for (const [name, v] of Object.entries(links)) {
    t.append(node("tr", {}, node("td", { class: "name" }, name), node("td", { class: "num" }, num(v))));
  }
  return t;
}

/** A tantivy explanation: `{value, description, details: [...]}`, as a nested list. */
function tree(x) {
  const li = node("li", {}, `${num(x.value)} — ${x.description}`);
  if (Array.isArray(x.details) && x.details.length) {
    li.append(node("ul", { class: "tree" }, ...x.details.map((d) => tree(d).firstChild)));
  }
  return node("ul", { class: "tree" }, li);
}

$("f").addEventListener("submit", search);
$("boost").addEventListener("change", syncSwitches);
const initial = new URLSearchParams(location.search);
if (initial.get("model")) $("model").value = initial.get("model");
$("boost").checked = initial.get("boost") === "pagerank";
$("collapse").checked = initial.get("collapse") !== "none";
if (initial.get("rerank") === "false" && !$("boost").checked) $("rerank").checked = false;
syncSwitches();
if (initial.get("q")) {
  $("q").value = initial.get("q");
  search();
}

// The admin page: token, models (metrics, activate, roll back, delete, charts), training with
// a live progress bar and curves, and the job list. Talks only to rankd's /admin/ API.
"use strict";

const TOKEN_KEY = "rankd-admin-token";
const POLL_MS = 500;
const JOBS_REFRESH_MS = 2000;
/** Validation metrics shown in the models table, as keyed in `metrics.valid`. */
const METRICS = [
  ["map", "MAP"],
  ["mrr", "MRR"],
  ["ndcg@1", "NDCG@1"],
  ["ndcg@3", "NDCG@3"],
  ["ndcg@5", "NDCG@5"],
  ["ndcg@10", "NDCG@10"],
  ["p@10", "P@10"],
];
/** Metrics in the comparison chart. */
const COMPARED = [
  ["ndcg@1", "NDCG@1"],
  ["ndcg@3", "NDCG@3"],
  ["ndcg@5", "NDCG@5"],
  ["ndcg@10", "NDCG@10"],
  ["map", "MAP"],
];
/** Models drawn in the comparison chart (the newest, plus the active one). */
const MAX_COMPARED_MODELS = 8;

const $ = (id) => document.getElementById(id);

function node(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

/** Shows `text` in a message line; `kind` is "error", "ok" or "" (neutral). */
function say(id, text, kind = "") {
  if (id === "models-msg") modelsMsgIsLoad = false;
  const p = $(id);
  p.textContent = text;
  p.className = `msg ${kind}`;
}

/**
 * Calls the admin API. Resolves to the parsed JSON body (null for 204); rejects with an Error
 * whose message is the API's own error message (`{"error":{"message",...}}`) and status.
 */
async function api(method, path, body) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) throw new Error("enter the admin token first");
  const headers = { Authorization: `Bearer ${token}` };
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new Error(`cannot reach rankd (${e.message})`);
  }
  const text = resp.status === 204 ? "" : await resp.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!resp.ok) {
    const err = data && data.error;
    const detail = err ? err.message + (err.field ? ` (field: ${err.field})` : "") : text.slice(0, 300) || resp.statusText;
    const e = new Error(`${resp.status} ${err ? err.code : resp.statusText}: ${detail}`);
    e.status = resp.status;
    throw e;
  }
  return data;
}

const fmt = (v) => (Number.isFinite(v) ? v.toFixed(4) : "–");
/** A timestamp as local `YYYY-MM-DD HH:MM:SS`. */
function when(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// ---------------------------------------------------------------------------------------
// Token

function tokenSet() {
  return Boolean(sessionStorage.getItem(TOKEN_KEY));
}

async function useToken(ev) {
  ev.preventDefault();
  const token = $("token").value.trim();
  if (!token) {
    say("token-msg", "the token is empty", "error");
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $("token").value = "";
  try {
    await api("GET", "/admin/jobs?limit=1");
    say("token-msg", "token accepted (kept until this tab closes)", "ok");
  } catch (e) {
    say("token-msg", e.message, "error");
    if (e.status === 401 || e.status === 503) sessionStorage.removeItem(TOKEN_KEY);
    return;
  }
  refreshAll();
}

function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  say("token-msg", "token forgotten");
  trainingJob = null;
  jobsRunning = false;
  models = [];
  for (const id of ["compare-chart", "model-curves", "train-curves"]) $(id).replaceChildren();
  $("models").tBodies[0].replaceChildren();
  $("jobs").tBodies[0].replaceChildren();
  $("train-job").hidden = true;
  say("models-msg", "");
  say("jobs-msg", "");
  say("train-msg", "");
}

// ---------------------------------------------------------------------------------------
// Models

let models = [];
/** The model whose training curves are shown under the table. */
let curvesOf = null;
/** Whether the models message line holds a message of `loadModels` (not of an action). */
let modelsMsgIsLoad = false;

async function loadModels() {
  let data;
  try {
    data = await api("GET", "/admin/models");
  } catch (e) {
    say("models-msg", e.message, "error");
    modelsMsgIsLoad = true;
    return;
  }
  models = data.models || [];
  // The message line reports the last action; a load only replaces its own messages.
  if (models.length === 0) {
    say("models-msg", "no models yet: train one below");
    modelsMsgIsLoad = true;
  } else if (modelsMsgIsLoad) {
    say("models-msg", "");
    modelsMsgIsLoad = false;
  }
  if (!models.some((m) => m.id === curvesOf)) curvesOf = data.active || (models[0] && models[0].id) || null;
  renderModels(data.active);
  renderComparison(data.active);
  renderModelCurves();
}

function renderModels(active) {
  const head = node("tr", {}, node("th", {}, "model"), node("th", {}, "objective · kind"), node("th", {}, "created"));
  for (const [, label] of METRICS) head.append(node("th", { class: "num" }, label));
  head.append(node("th", { title: "the activation guard: MRR@10 on the queries training held out, model vs first phase" }, "held-out MRR@10"));
  head.append(node("th", {}, ""));
  $("models").tHead.replaceChildren(head);

  const best = {};
  for (const [key] of METRICS) {
    const vals = models.map((m) => valid(m)[key]).filter(Number.isFinite);
    best[key] = vals.length ? Math.max(...vals) : null;
  }
  const rows = models.map((m) => {
    const isActive = m.id === active || m.status === "active";
    const name = node("td", { class: "model-id" }, m.id);
    if (isActive) name.append(" ", node("span", { class: "badge" }, "active"));
    if (m.parent) name.append(node("div", { class: "note" }, `from ${m.parent}`));
    const tr = node("tr", { class: isActive ? "active" : "", "data-model": m.id },
      name,
      node("td", {}, `${m.objective || "?"} · ${m.model || "?"}`),
      node("td", { class: "when" }, when(m.created_at)));
    const train = (m.metrics && m.metrics.train) || {};
    for (const [key] of METRICS) {
      const v = valid(m)[key];
      const td = node("td", { class: "num", title: `train: ${fmt(train[key])}` }, fmt(v));
      if (Number.isFinite(v) && v === best[key] && models.length > 1) td.classList.add("best");
      tr.append(td);
    }
    tr.append(guardCell(m.guard));
    const actions = node("td", { class: "actions" });
    actions.append(node("button", { type: "button", class: "curves", onclick: () => { curvesOf = m.id; renderModelCurves(); } }, "curves"));
    if (!isActive) {
      actions.append(node("button", { type: "button", class: "activate", onclick: () => activate(m.id) }, "activate"));
      actions.append(node("button", { type: "button", class: "delete danger", onclick: () => remove(m.id) }, "delete"));
    }
    tr.append(actions);
    return tr;
  });
  $("models").tBodies[0].replaceChildren(...rows);
}

/** The activation guard's comparison: per class, the model's MRR@10 against the first
 * phase's (and the replaced model's), and the reason when the guard refuses the model. */
function guardCell(g) {
  const td = node("td", { class: "guard" });
  if (!g || !Array.isArray(g.classes) || g.classes.length === 0) {
    td.append("–");
    return td;
  }
  for (const c of g.classes) {
    const vs = Number.isFinite(c.active) ? `, active ${fmt(c.active)}` : "";
    td.append(node("div", { title: `${c.queries} queries; difference ${fmt(c.vs_first_phase.mean)} (95% ${fmt(c.vs_first_phase.low)} to ${fmt(c.vs_first_phase.high)})` },
      `${c.class}: ${fmt(c.candidate)} vs ${fmt(c.first_phase)}${vs}`));
  }
  if (g.refused) {
    td.classList.add("refused");
    td.append(node("div", { class: "note", title: g.refused }, "refused by the guard"));
  }
  return td;
}

function valid(m) {
  return (m.metrics && m.metrics.valid) || {};
}

function renderComparison(active) {
  let shown = models.slice();
  if (shown.length > MAX_COMPARED_MODELS) {
    // The newest models, and the active one even when it is older.
    shown.sort((a, b) => String(b.created_at).localeCompare(String(a.created_at)));
    const keep = shown.slice(0, MAX_COMPARED_MODELS);
    const act = models.find((m) => m.id === active);
    if (act && !keep.includes(act)) keep[keep.length - 1] = act;
    shown = keep;
  }
  const series = shown.map((m) => ({
    name: m.id + (m.id === active ? " (active)" : ""),
    values: COMPARED.map(([key]) => valid(m)[key]),
  }));
  const title = models.length > shown.length
    ? `NDCG@k and MAP on validation queries (${shown.length} of ${models.length} models)`
    : "NDCG@k and MAP on validation queries";
  $("compare-chart").replaceChildren(Charts.bars(title, COMPARED.map(([, l]) => l), series));
}

/** Two charts: validation metrics and training loss per epoch. */
function curveCharts(log) {
  const pts = (key) => log.map((e) => [e.epoch, e[key]]);
  return [
    Charts.line("validation", "epoch", [
      { name: "valid MAP", points: pts("valid_map") },
      { name: "valid NDCG@10", points: pts("valid_ndcg10") },
    ], { integerX: true }),
    Charts.line("training loss", "epoch", [{ name: "train loss", points: pts("train_loss") }], { integerX: true }),
  ];
}

function renderModelCurves() {
  const m = models.find((x) => x.id === curvesOf);
  if (!m) {
    $("model-curves-title").textContent = "Training curves";
    $("model-curves").replaceChildren();
    return;
  }
  $("model-curves-title").textContent = `Training curves of ${m.id}`;
  const log = Array.isArray(m.log) ? m.log : [];
  $("model-curves").replaceChildren(...(log.length ? curveCharts(log) : [node("p", { class: "note" }, "this model has no training log")]));
}

async function activate(id) {
  const path = `/admin/models/${encodeURIComponent(id)}/activate`;
  try {
    const r = await api("POST", path);
    say("models-msg", `active model: ${r.active}`, "ok");
  } catch (e) {
    // The activation guard refused it: say why, and activate only if the operator insists.
    if (e.status === 409 && e.message.includes("force=true") && confirm(`${e.message}\n\nActivate it anyway?`)) {
      try {
        const r = await api("POST", `${path}?force=true`);
        say("models-msg", `active model: ${r.active} (forced past the activation guard)`, "ok");
      } catch (e2) {
        say("models-msg", e2.message, "error");
      }
    } else {
      say("models-msg", e.message, "error");
    }
  }
  loadModels();
}

async function rollback() {
  try {
    const r = await api("POST", "/admin/models/rollback");
    say("models-msg", `rolled back; active model: ${r.active}`, "ok");
  } catch (e) {
    say("models-msg", e.message, "error");
  }
  loadModels();
}

async function remove(id) {
  if (!confirm(`Delete model ${id}? Its file and metrics are removed.`)) return;
  try {
    await api("DELETE", `/admin/models/${encodeURIComponent(id)}`);
    say("models-msg", `deleted ${id}`, "ok");
  } catch (e) {
    say("models-msg", e.message, "error");
  }
  loadModels();
}

// ---------------------------------------------------------------------------------------
// Training

let trainingJob = null;

async function startTraining(ev) {
  ev.preventDefault();
  const lr = Number($("lr").value);
  const epochs = Number($("epochs").value);
  if (!(lr > 0)) return say("train-msg", "the learning rate must be a positive number", "error");
  if (!Number.isInteger(epochs) || epochs < 1) return say("train-msg", "epochs must be a positive whole number", "error");
  const params = { objective: $("objective").value, model: $("model").value, lr, epochs };
  say("train-msg", "starting…");
  let r;
  try {
    r = await api("POST", "/admin/train", params);
  } catch (e) {
    say("train-msg", e.message, "error");
    return;
  }
  const id = r.job && typeof r.job === "object" ? r.job.id : r.job;
  say("train-msg", `training job ${id} started`, "ok");
  followJob(id);
  loadJobs();
}

/** Polls one training job until it finishes, drawing its progress and curves. */
async function followJob(id) {
  trainingJob = id;
  $("train-job").hidden = false;
  $("train-job-title").textContent = `job ${id}`;
  $("train-cancel").disabled = false;
  $("train-status").textContent = "queued";
  $("train-status").className = "status";
  setProgress(0);
  $("train-curves").replaceChildren();
  $("train-log").textContent = "";
  while (trainingJob === id) {
    let job;
    try {
      job = await api("GET", `/admin/jobs/${id}`);
    } catch (e) {
      $("train-status").textContent = `cannot read job ${id}: ${e.message}`;
      $("train-status").className = "status error";
      if (e.status === 404 || e.status === 401) return;
      await sleep(POLL_MS * 4);
      continue;
    }
    showJob(job);
    if (job.status !== "queued" && job.status !== "running") {
      $("train-cancel").disabled = true;
      const made = resultModel(job);
      if (made) curvesOf = made;
      loadModels();
      loadJobs();
      return;
    }
    await sleep(POLL_MS);
  }
}

function showJob(job) {
  setProgress(job.progress);
  const lines = [];
  const epochs = [];
  for (const { line } of job.logs || []) {
    const v = epochLine(line);
    if (v) epochs.push(v);
    lines.push(v ? describeEpoch(v) : line);
  }
  if (epochs.length) $("train-curves").replaceChildren(...curveCharts(epochs));
  $("train-log").textContent = lines.slice(-8).join("\n");
  let text = `${job.status}${job.message ? ": " + job.message : ""}`;
  let kind = "";
  if (job.status === "succeeded") {
    kind = "ok";
    const model = resultModel(job);
    if (model) text += ` — new model ${model} (activate it in the table above)`;
  } else if (job.status === "failed") {
    kind = "error";
    text = `failed: ${job.error || job.message}`;
  } else if (job.status === "cancelled") {
    text = "cancelled";
  }
  $("train-status").textContent = text;
  $("train-status").className = `status ${kind}`;
}

/** The id of the model a finished training job made, when its result names one. */
function resultModel(job) {
  const r = job.result;
  if (!r || typeof r !== "object") return null;
  const id = r.model_id || r.id || (r.model && typeof r.model === "object" ? r.model.id : r.model);
  return typeof id === "string" ? id : null;
}

/** A log line holding one epoch's JSON record, parsed; null for plain-text lines. */
function epochLine(line) {
  try {
    const v = JSON.parse(line);
    return v && typeof v === "object" && Number.isFinite(v.epoch) ? v : null;
  } catch {
    return null;
  }
}

function describeEpoch(v) {
  const parts = [`epoch ${v.epoch}`];
  if (Number.isFinite(v.train_loss)) parts.push(`train loss ${v.train_loss.toFixed(5)}`);
  if (Number.isFinite(v.valid_map)) parts.push(`valid MAP ${v.valid_map.toFixed(4)}`);
  if (Number.isFinite(v.valid_ndcg10)) parts.push(`NDCG@10 ${v.valid_ndcg10.toFixed(4)}`);
  if (Number.isFinite(v.seconds)) parts.push(`${v.seconds.toFixed(2)} s`);
  return parts.join("  ");
}

function setProgress(fraction) {
  const pct = Math.round(Math.max(0, Math.min(1, Number(fraction) || 0)) * 100);
  const bar = $("train-progress");
  bar.querySelector(".fill").style.width = `${pct}%`;
  bar.querySelector(".label").textContent = `${pct}%`;
  bar.setAttribute("aria-valuenow", pct);
}

async function cancelJob(id, msgId) {
  try {
    const r = await api("POST", `/admin/jobs/${id}/cancel`);
    say(msgId, r.status === "cancelled" ? `job ${id} cancelled` : `job ${id} will stop at its next check`, "ok");
  } catch (e) {
    say(msgId, e.message, "error");
  }
  loadJobs();
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------
// Jobs

let jobsRunning = false;

async function loadJobs() {
  let data;
  try {
    data = await api("GET", "/admin/jobs?limit=25");
  } catch (e) {
    say("jobs-msg", e.message, "error");
    return;
  }
  if ($("jobs-msg").classList.contains("error")) say("jobs-msg", "");
  const jobs = data.jobs || [];
  jobsRunning = jobs.some((j) => j.status === "queued" || j.status === "running");
  const rows = jobs.map((j) => {
    const pct = Math.round((Number(j.progress) || 0) * 100);
    const bar = node("div", { class: "progress small" }, node("div", { class: "fill" }), node("span", { class: "label" }, `${pct}%`));
    bar.querySelector(".fill").style.width = `${pct}%`;
    const running = j.status === "queued" || j.status === "running";
    const action = node("td");
    if (running && !j.cancel_requested) {
      action.append(node("button", { type: "button", class: "cancel danger", onclick: () => cancelJob(j.id, "jobs-msg") }, "cancel"));
    } else if (j.cancel_requested && running) {
      action.append("cancelling…");
    }
    if (j.kind === "train" && running && trainingJob !== j.id) {
      action.append(node("button", { type: "button", onclick: () => followJob(j.id) }, "follow"));
    }
    const message = j.status === "failed" ? (j.error || j.message) : (j.message || summary(j.result));
    return node("tr", { class: `job-${j.status}`, "data-job": j.id },
      node("td", {}, j.id),
      node("td", {}, j.kind),
      node("td", { class: "params" }, summary(j.params)),
      node("td", {}, j.status),
      node("td", {}, bar),
      node("td", { class: "message" }, message || ""),
      node("td", { class: "when" }, when(j.created_at)),
      node("td", { class: "num" }, Number.isFinite(j.seconds) ? j.seconds.toFixed(1) : "–"),
      action);
  });
  $("jobs").tBodies[0].replaceChildren(...rows);
  if (jobs.length === 0) $("jobs").tBodies[0].append(node("tr", {}, node("td", { colspan: 9, class: "note" }, "no jobs yet")));
}

/** A job result in one line: its scalar fields. */
function summary(result) {
  if (!result || typeof result !== "object") return result == null ? "" : String(result);
  return Object.entries(result)
    .filter(([, v]) => v !== null && typeof v !== "object")
    .slice(0, 5)
    .map(([k, v]) => `${k}=${typeof v === "number" && !Number.isInteger(v) ? v.toFixed(4) : v}`)
    .join(", ");
}

// ---------------------------------------------------------------------------------------
// Experiments

let experimentRunning = false;

const DECISIONS = {
  collecting: "collecting (fewer than min. impressions)",
  candidate_wins: "candidate wins",
  active_wins: "active wins",
  no_difference_yet: "no difference yet",
};

const pValue = (p) => (p < 1e-4 ? p.toExponential(2) : fmt(p));

async function loadExperiments() {
  let data;
  try {
    data = await api("GET", "/admin/experiments");
  } catch (e) {
    say("experiments-msg", e.message, "error");
    return;
  }
  const list = data.experiments || [];
  experimentRunning = data.running != null;
  const rows = list.map((x) => {
    const stop = x.status === "running" ? node("button", { type: "button", onclick: () => stopExperiment(x.id) }, "Stop") : "";
    return node(
      "tr",
      { class: x.status === "running" ? "active" : "" },
      node("td", {}, x.id),
      node("td", { title: x.note || "" }, x.status),
      node("td", {}, `${x.active || "–"} · ${x.candidate}`),
      node("td", { class: "num" }, x.share),
      node("td", { class: "num" }, x.impressions),
      node("td", { class: "num" }, x.clicked_impressions),
      node("td", { class: "num" }, x.wins_a),
      node("td", { class: "num" }, x.wins_b),
      node("td", { class: "num" }, x.ties),
      node("td", { class: "num" }, pValue(x.p_value)),
      node("td", {}, DECISIONS[x.decision] || x.decision),
      node("td", { class: "num" }, pValue(x.sequential_p_value)),
      node("td", {}, DECISIONS[x.sequential_decision] || x.sequential_decision),
      node("td", {}, when(x.created_at)),
      node("td", {}, stop),
    );
  });
  $("experiments").tBodies[0].replaceChildren(...rows);
  if (list.length === 0) $("experiments").tBodies[0].append(node("tr", {}, node("td", { colspan: 15, class: "note" }, "no experiments yet")));
}

async function startExperiment(ev) {
  ev.preventDefault();
  const body = {
    candidate: $("experiment-candidate").value.trim(),
    share: Number($("experiment-share").value),
    promote_on_win: $("experiment-promote").checked,
  };
  if ($("experiment-min").value !== "") body.min_impressions = Number($("experiment-min").value);
  if ($("experiment-alpha").value !== "") body.alpha = Number($("experiment-alpha").value);
  try {
    const x = await api("POST", "/admin/experiments", body);
    say("experiments-msg", `experiment ${x.id} started: ${x.candidate} against ${x.active}`, "ok");
  } catch (e) {
    say("experiments-msg", e.message, "error");
  }
  loadExperiments();
}

async function stopExperiment(id) {
  try {
    await api("POST", `/admin/experiments/${id}/stop`);
    say("experiments-msg", `experiment ${id} stopped`, "ok");
  } catch (e) {
    say("experiments-msg", e.message, "error");
  }
  loadExperiments();
}

// ---------------------------------------------------------------------------------------

function refreshAll() {
  loadModels();
  loadJobs();
  loadExperiments();
}

$("token-form").addEventListener("submit", useToken);
$("token-forget").addEventListener("click", forgetToken);
$("models-refresh").addEventListener("click", loadModels);
$("rollback").addEventListener("click", rollback);
$("train-form").addEventListener("submit", startTraining);
$("train-cancel").addEventListener("click", () => trainingJob && cancelJob(trainingJob, "train-msg"));
$("jobs-refresh").addEventListener("click", loadJobs);
$("experiment-form").addEventListener("submit", startExperiment);
$("experiments-refresh").addEventListener("click", loadExperiments);
setInterval(() => {
  if (document.visibilityState !== "visible") return;
  if (jobsRunning) loadJobs();
  if (experimentRunning) loadExperiments();
}, JOBS_REFRESH_MS);

if (tokenSet()) {
  say("token-msg", "using the token given earlier in this tab");
  refreshAll();
} else {
  say("token-msg", "enter the admin token to manage models and jobs");
}

// The web UI in a real browser (headless Chromium driven by playwright-core).
//
//   RANKD_BIN=target/debug/rankd RANKD_TEST_DATA_DIR=/tmp/rankd-ui node tests/browser/ui.test.mjs
//
// Builds nothing: RANKD_BIN is the rankd binary, RANKD_TEST_DATA_DIR an empty or missing
// directory for the test's index (default: a fresh temporary directory, removed afterwards).
// CHROMIUM overrides /usr/bin/chromium; SCREENSHOT_DIR overrides docs/screenshots.
//
// It indexes a small linked corpus (corpus.mjs) with `rankd ingest` and `rankd graph`, serves
// it with an admin token, stores judgments through the admin API, and then, in the browser:
// searches and opens a score explanation; clicks a result and checks that the click is stored
// as an event (POST /events); checks that documents whose `url` is a `javascript:`
// or `data:` URL are shown without a link and that clicking their title runs nothing (stored
// XSS, issue 16) and that the pages carry a Content-Security-Policy; on /admin rejects a wrong
// token, accepts the right one, trains a model and watches the progress bar reach 100%, trains a second one, activates
// the first, activates the second, rolls back, deletes the second; cancels a running job from
// the job list; and checks that the search page now reports the reranker and explains its
// features. Screenshots go to docs/screenshots/.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

import { documents, judgments } from "./corpus.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "../..");
const RANKD = process.env.RANKD_BIN;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const SHOTS = process.env.SCREENSHOT_DIR || path.join(REPO, "docs", "screenshots");
const TOKEN = randomBytes(16).toString("hex");
/** Longest wait for a training job to finish. */
const TRAIN_TIMEOUT_MS = 5 * 60_000;
/** Longest wait for the server to report ready. */
const READY_TIMEOUT_MS = 60_000;
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

function log(msg) {
  console.log(`[ui-test ${new Date().toISOString().slice(11, 19)}] ${msg}`);
}

/** Runs a rankd subcommand to completion; throws with its output if it fails. */
function rankd(...args) {
  const r = spawnSync(RANKD, args, { encoding: "utf8" });
  if (r.error) throw new Error(`cannot run ${RANKD}: ${r.error.message}`);
  if (r.status !== 0) {
    throw new Error(`rankd ${args.join(" ")} exited with ${r.status}:\n${r.stdout}\n${r.stderr}`);
  }
  return r.stdout;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Starts `rankd serve` and waits for /readyz. */
async function serve(dataDir) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = spawn(RANKD, ["serve", "--addr", `127.0.0.1:${port}`, "--data-dir", dataDir], {
    env: { ...process.env, RANKD_ADMIN_TOKEN: TOKEN, RANKD_LOG: process.env.RANKD_LOG || "warn,rankd=info" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  let exited = null;
  child.on("exit", (code, signal) => (exited = signal || code));
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (exited !== null) throw new Error(`rankd serve exited (${exited}) before it was ready:\n${output}`);
    try {
      const r = await fetch(`${base}/readyz`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`rankd serve not ready after ${READY_TIMEOUT_MS} ms:\n${output}`);
    await sleep(200);
  }
  const stop = async () => {
    if (exited !== null) return;
    const done = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await Promise.race([done, sleep(10_000)]);
    if (exited === null) child.kill("SIGKILL");
  };
  return { base, stop, output: () => output };
}

/** The sum of the samples of the metric `name` at `base/metrics` (0 when it has none). */
async function metricSum(base, name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  return text
    .split("\n")
    .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
}

async function admin(base, method, route, body) {
  const r = await fetch(base + route, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${route}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** The data directory: the given one (must be empty or missing) or a fresh temporary one. */
function dataDir() {
  const given = process.env.RANKD_TEST_DATA_DIR;
  if (!given) return { dir: fs.mkdtempSync(path.join(os.tmpdir(), "rankd-ui-")), owned: true };
  if (fs.existsSync(given) && fs.readdirSync(given).length > 0) {
    throw new Error(`RANKD_TEST_DATA_DIR=${given} is not empty; give an empty or missing directory`);
  }
  fs.mkdirSync(given, { recursive: true });
  return { dir: given, owned: false };
}

/** Saves a screenshot of the whole page, or of the element `selector`. */
async function shot(page, name, selector) {
  const file = path.join(SHOTS, `${name}.png`);
  // Finished CSS transitions (the progress bar's width), not a frame in between.
  const opts = { path: file, animations: "disabled" };
  if (selector) await page.locator(selector).screenshot(opts);
  else await page.screenshot({ ...opts, fullPage: true });
  log(`screenshot ${path.relative(REPO, file)}`);
}

/** Starts a training job from the admin form and waits for it to finish. */
async function train(page, { objective, model, lr, epochs }) {
  await page.selectOption("#objective", objective);
  await page.selectOption("#model", model);
  await page.fill("#lr", String(lr));
  await page.fill("#epochs", String(epochs));
  await page.click("#train-start");
  await page.waitForFunction(() => /training job \d+ started|\d{3} /.test(document.getElementById("train-msg").textContent));
  const msg = await page.textContent("#train-msg");
  assert.match(msg, /training job \d+ started/, `starting the training failed: ${msg}`);
  const job = Number(msg.match(/job (\d+)/)[1]);
  log(`training job ${job} (${objective}, ${model}) started`);
  await page.waitForFunction(
    () => /^(succeeded|failed|cancelled)/.test(document.getElementById("train-status").textContent),
    null,
    { timeout: TRAIN_TIMEOUT_MS, polling: 200 },
  );
  const status = await page.textContent("#train-status");
  assert.match(status, /^succeeded/, `training job ${job} did not succeed: ${status}`);
  assert.equal(await page.textContent("#train-progress .label"), "100%");
  assert.equal(await page.getAttribute("#train-progress", "aria-valuenow"), "100");
  log(`training job ${job}: progress 100%, ${status}`);
  return job;
}

async function main() {
  assert.ok(RANKD, "set RANKD_BIN to the rankd binary (e.g. target/debug/rankd)");
  assert.ok(fs.existsSync(CHROMIUM), `no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM)`);
  fs.mkdirSync(SHOTS, { recursive: true });
  const { dir, owned } = dataDir();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "rankd-ui-work-"));
  let server = null;
  let context = null;
  let page = null;
  let passed = false;
  try {
    const docsFile = path.join(work, "docs.jsonl");
    fs.writeFileSync(docsFile, documents().map((d) => JSON.stringify(d)).join("\n") + "\n");
    log(`indexing ${documents().length} documents into ${dir}`);
    rankd("ingest", "--format", "jsonl", "--input", docsFile, "--data-dir", dir);
    rankd("graph", "--data-dir", dir);
    server = await serve(dir);
    log(`rankd serving at ${server.base}`);
    const stored = await admin(server.base, "POST", "/admin/judgments", judgments());
    assert.equal(stored.stored, judgments().length);
    log(`stored ${stored.stored} judgments`);

    context = await chromium.launchPersistentContext(path.join(work, "profile"), {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1280, height: 900 },
    });
    page = context.pages()[0] || (await context.newPage());
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(e.message));
    const dialogs = [];
    page.on("dialog", (d) => {
      dialogs.push(d.message());
      d.accept();
    });

    // --- Search page, first phase only ---------------------------------------------------
    await page.goto(`${server.base}/`);
    await page.fill("#q", "hash map");
    await page.click("form#f button");
    await page.waitForSelector(".hit");
    assert.match(await page.textContent("#meta"), /matching documents/);
    assert.equal((await page.textContent("#reranker")).trim(), "no reranker active");
    assert.match(await page.textContent(".hit > a"), /HashMap/);
    await page.click(".hit details.explain summary");
    await page.waitForSelector(".hit details.explain[open] .panel ul.tree");
    const firstPanel = await page.textContent(".hit details.explain[open] .panel");
    assert.match(firstPanel, /Link scores/);
    assert.match(firstPanel, /pagerank/);
    assert.match(firstPanel, /bm25f/);
    await shot(page, "search-explain");

    // A click on a result is reported to POST /events (navigator.sendBeacon) and stored: the
    // server's click counter moves only once the event is committed. The navigation itself is
    // cancelled (the result's URL is not served here).
    const clicksBefore = await metricSum(server.base, "rankd_clicks_total");
    await page.$eval(".hit > a", (a) => a.addEventListener("click", (e) => e.preventDefault()));
    await page.click(".hit > a");
    const clickDeadline = Date.now() + 10_000;
    while ((await metricSum(server.base, "rankd_clicks_total")) !== clicksBefore + 1) {
      assert.ok(Date.now() < clickDeadline, "the click on a result was not stored within 10 s");
      await sleep(100);
    }
    log("a click on a result is stored as an event");

    // An error from the API is shown, not swallowed.
    await page.fill("#q", "x".repeat(17000)); // over the 16 KB query limit
    await page.click("form#f button");
    await page.waitForSelector("#error");
    assert.match(await page.textContent("#error"), /\S/);
    log(`search error shown: ${(await page.textContent("#error")).slice(0, 80)}`);

    // --- Stored XSS: document URLs that are not http(s) ----------------------------------
    // A document's `url` is whatever was ingested. Rendered as a link, `javascript:` would run
    // on rankd's origin (which serves /admin) when clicked; it must be shown as text.
    const hostile = [
      { id: "xss-js", url: "javascript:window.__rankdXss=1;alert('xss')", title: "Zebrafish javascript link" },
      { id: "xss-data", url: "data:text/html,<script>alert('xss')</script>", title: "Zebrafish data link" },
    ].map((d) => ({ ...d, body: "zebrafish aquarium notes" }));
    const batch = await fetch(`${server.base}/admin/documents`, {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/x-ndjson" },
      body: hostile.map((d) => JSON.stringify(d)).join("\n"),
    });
    assert.equal(batch.status, 200, await batch.text());
    const searchPage = await page.goto(`${server.base}/?q=zebrafish`);
    await page.waitForFunction(() => document.querySelectorAll(".hit").length === 2);
    // Click each result's title, link or not, as a user would.
    for (const title of await page.$$(".hit > :first-child")) await title.click();
    await sleep(500);
    assert.equal(await page.evaluate(() => window.__rankdXss), undefined, "the javascript: URL ran");
    assert.deepEqual(dialogs, [], "a dialog opened from a document URL");
    assert.ok(page.url().startsWith(server.base), `navigated away to ${page.url()}`);
    assert.equal(await page.$$eval(".hit a[href^='javascript:' i], .hit a[href^='data:' i]", (as) => as.length), 0,
      "a javascript: or data: URL is rendered as a link");
    const csp = searchPage.headers()["content-security-policy"] || "";
    assert.match(csp, /script-src 'self'/, `the search page's CSP: ${csp}`);
    assert.equal(searchPage.headers()["x-frame-options"], "DENY");
    assert.equal(searchPage.headers()["x-content-type-options"], "nosniff");
    log("javascript: and data: document URLs are shown as text and run nothing");
    await admin(server.base, "POST", "/admin/documents/delete", { ids: hostile.map((d) => d.id) });

    // --- Admin page ----------------------------------------------------------------------
    await page.goto(`${server.base}/admin`);
    await page.fill("#token", "wrong-token");
    await page.click("#token-save");
    await page.waitForFunction(() => document.getElementById("token-msg").classList.contains("error"));
    assert.match(await page.textContent("#token-msg"), /401/);
    await page.fill("#token", TOKEN);
    await page.click("#token-save");
    await page.waitForFunction(() => /token accepted/.test(document.getElementById("token-msg").textContent));
    await page.waitForFunction(() => /no models yet/.test(document.getElementById("models-msg").textContent));

    const first = await train(page, { objective: "stable-ap", model: "linear", lr: 0.005, epochs: 30 });
    await page.waitForSelector("#train-curves svg polyline");
    await shot(page, "admin-training");
    await page.waitForSelector("#models tbody tr[data-model]");
    const firstModel = await page.getAttribute("#models tbody tr[data-model]", "data-model");
    log(`job ${first} made model ${firstModel}`);

    await train(page, { objective: "ranknet", model: "mlp", lr: 0.01, epochs: 10 });
    await page.waitForFunction(() => document.querySelectorAll("#models tbody tr[data-model]").length === 2);

    // Activate the first model (by id, whatever the table's order).
    await page.click(`#models tbody tr[data-model="${firstModel}"] button.activate`);
    await page.waitForSelector(`#models tbody tr.active[data-model="${firstModel}"] .badge`);
    assert.match(await page.textContent("#models-msg"), new RegExp(`active model: ${firstModel}`));
    // Activating the active one again is not offered; rolling back with no history is a 409.
    assert.equal(await page.$(`#models tbody tr[data-model="${firstModel}"] button.activate`), null);
    await page.click("#rollback");
    await page.waitForFunction(() => document.getElementById("models-msg").classList.contains("error"));
    assert.match(await page.textContent("#models-msg"), /409/);
    log(`rollback without history: ${await page.textContent("#models-msg")}`);
    await page.click(`#models tbody tr[data-model="${firstModel}"] button.curves`);
    await page.waitForSelector("#compare-chart svg rect");
    await page.waitForSelector("#model-curves svg polyline");
    await shot(page, "admin-models");

    // Activate the second model, roll back to the first, delete the second.
    const secondModel = await page.$eval(
      `#models tbody tr[data-model]:not([data-model="${firstModel}"])`,
      (tr) => tr.dataset.model,
    );
    await page.click(`#models tbody tr[data-model="${secondModel}"] button.activate`);
    await page.waitForSelector(`#models tbody tr.active[data-model="${secondModel}"]`);
    await page.click("#rollback");
    await page.waitForFunction(() => /rolled back/.test(document.getElementById("models-msg").textContent));
    assert.match(await page.textContent("#models-msg"), new RegExp(`active model: ${firstModel}`));
    await page.waitForSelector(`#models tbody tr.active[data-model="${firstModel}"]`);
    await page.click(`#models tbody tr[data-model="${secondModel}"] button.delete`);
    await page.waitForFunction(
      (id) => !document.querySelector(`#models tbody tr[data-model="${id}"]`),
      secondModel,
    );
    assert.match(await page.textContent("#models-msg"), new RegExp(`deleted ${secondModel}`));
    log(`activated ${secondModel}, rolled back to ${firstModel}, deleted ${secondModel}`);

    // Cancel a running job from the job list. Training on this small corpus is quick, so the
    // job may finish before the click reaches it (no cancel button, or the API's 409); then
    // another job is started.
    let cancelled = null;
    for (let attempt = 1; attempt <= 5 && cancelled === null; attempt++) {
      await page.selectOption("#objective", "ranknet");
      await page.selectOption("#model", "mlp");
      await page.fill("#epochs", "10000");
      await page.click("#train-start");
      await page.waitForFunction(() => /training job \d+ started|\d{3} /.test(document.getElementById("train-msg").textContent));
      const msg = await page.textContent("#train-msg");
      assert.match(msg, /training job \d+ started/, `starting the training failed: ${msg}`);
      const job = Number(msg.match(/job (\d+)/)[1]);
      const button = await page
        .waitForSelector(`#jobs tbody tr[data-job="${job}"] button.cancel`, { timeout: 3000 })
        .catch(() => null);
      if (button) await button.click().catch(() => {});
      await page.waitForFunction(
        () => /^(succeeded|failed|cancelled)/.test(document.getElementById("train-status").textContent),
        null,
        { timeout: TRAIN_TIMEOUT_MS, polling: 100 },
      );
      const status = await page.textContent("#train-status");
      if (/^cancelled/.test(status)) cancelled = job;
      else log(`job ${job} ended (${status.slice(0, 40)}) before the cancel; again`);
    }
    assert.ok(cancelled !== null, "no training job could be cancelled from the job list");
    await page.click("#jobs-refresh");
    await page.waitForSelector(`#jobs tbody tr.job-cancelled[data-job="${cancelled}"]`);
    log(`job ${cancelled} cancelled from the job list`);
    await shot(page, "admin-jobs", "#jobs-section");

    // --- Search page with the reranker ---------------------------------------------------
    await page.goto(`${server.base}/?q=hash+map`);
    await page.waitForSelector(".hit");
    assert.equal((await page.textContent("#reranker")).trim(), firstModel);
    await page.click(".hit details.explain summary");
    const panel = ".hit details.explain[open] .panel";
    await page.waitForSelector(`${panel} table.features`);
    const text = await page.textContent(panel);
    assert.match(text, new RegExp(`Reranker ${firstModel}`));
    assert.match(text, /first-phase rank \d+/);
    assert.match(text, /Features by contribution/);
    assert.match(text, /Link scores/);
    assert.match(text, /First-phase score/);
    // Contributions are sorted by magnitude.
    const contributions = await page.$$eval(`${panel} > table.features tr td:nth-child(3)`, (tds) =>
      tds.map((td) => Math.abs(Number(td.textContent))));
    assert.ok(contributions.length > 0);
    for (let i = 1; i < contributions.length; i++) assert.ok(contributions[i - 1] >= contributions[i]);
    await shot(page, "search-reranked");

    // The rerank switch turns the second phase off.
    await page.uncheck("#rerank");
    await page.click("form#f button");
    await page.waitForFunction(() => document.getElementById("reranker")?.textContent === "not reranked");

    assert.deepEqual(pageErrors, [], "JavaScript errors on the pages");
    log("all browser checks passed");
    passed = true;
  } catch (e) {
    if (page) {
      const file = path.join(work, "failure.png");
      await page.screenshot({ path: file, fullPage: true }).catch(() => {});
      console.error(`failure screenshot: ${file}`);
    }
    if (server) console.error(`--- rankd serve output ---\n${server.output().slice(-4000)}`);
    throw e;
  } finally {
    if (context) await context.close();
    if (server) await server.stop();
    if (owned) fs.rmSync(dir, { recursive: true, force: true });
    // On failure the work directory keeps the corpus, the browser profile and failure.png.
    if (passed) fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

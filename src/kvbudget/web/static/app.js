// kvbudget's page: the inputs as JSON to /api/*, the answers shown as they come. Every figure is the server's
// (the same documents `kvbudget ... --json` prints); this file only lays them out, and draws two SVG charts.
"use strict";

const $ = (id) => document.getElementById(id);
const FIELDS = ["model", "config", "gpu", "num-gpus", "engine", "context", "batch", "weights-dtype", "kv-dtype", "launch"];
const COLORS = { "weights": "#4C72B0", "KV cache": "#55A868", "activation": "#C44E52", "CUDA graphs": "#8172B2",
  "overhead": "#CCB974", "free": "#DDDDDD" };
const OTHER = ["#4C72B0", "#55A868", "#C44E52", "#8172B2", "#CCB974", "#64B5CD"];
const SVG = "http://www.w3.org/2000/svg";
const GiB = 2 ** 30;
let engines = [];
let asked = 0; // the latest question: answers to older ones are dropped
let timer = null;

async function api(path, body) {
  const init = body === undefined ? {} : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
  const response = await fetch("/api/" + path, init);
  let doc;
  try { doc = await response.json(); } catch (e) { throw new Error(`${path}: the server answered ${response.status} without JSON`); }
  if (!response.ok) throw new Error(doc.error || `${path}: ${response.status}`);
  return doc;
}

// ---- formatting (display only) ----
const whole = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
function bytes(n) {
  if (n === null || n === undefined) return "–";
  if (Math.abs(n) >= GiB) return (n / GiB).toFixed(2) + " GiB";
  if (Math.abs(n) >= 2 ** 20) return (n / 2 ** 20).toFixed(1) + " MiB";
  if (Math.abs(n) >= 1024) return (n / 1024).toFixed(1) + " KiB";
  return n + " B";
}
function show(id, value, text) {
  const el = $(id);
  el.textContent = text === undefined ? whole(value) : text;
  el.dataset.value = value === null || value === undefined ? "" : JSON.stringify(value);
}
function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}
function table(id, headers, rows, classes = []) {
  const t = $(id);
  t.replaceChildren();
  const head = el("tr");
  headers.forEach((h) => head.append(el("th", {}, h)));
  t.append(head);
  rows.forEach((row, i) => {
    const tr = el("tr", classes[i] ? { class: classes[i] } : {});
    row.forEach((cell) => tr.append(el("td", {}, cell === null || cell === undefined ? "" : String(cell))));
    t.append(tr);
  });
}
function tableMessage(id, text) {
  const t = $(id);
  t.replaceChildren(el("caption", { class: "error-text" }, text));
}

// ---- the inputs ----
const text = (id) => $(id).value.trim();
const orNull = (s) => (s === "" ? null : s);

function modelInput() {
  const pasted = text("config");
  if (!pasted) return { model: text("model") };
  try {
    return { config: JSON.parse(pasted) };
  } catch (e) {
    throw new Error("config.json: not JSON (" + e.message + ")");
  }
}

function engineOptions() {
  const out = {};
  for (const input of $("engine-options").querySelectorAll("[data-dest]")) {
    const dest = input.dataset.dest;
    if (input.type === "checkbox") { if (input.checked) out[dest] = true; continue; }
    const value = input.value.trim();
    if (!value) continue;
    if (input.dataset.kind === "json") {
      try { out[dest] = JSON.parse(value); } catch (e) { throw new Error(`${input.dataset.flag}: not JSON (${e.message})`); }
    } else out[dest] = value;
  }
  return out;
}

function buildEngineOptions(keep = {}) {
  const box = $("engine-options");
  box.replaceChildren();
  const engine = engines.find((e) => e.name === $("engine").value);
  if (!engine) return;
  for (const o of engine.options.filter((x) => x.commands.includes("fit"))) {
    const id = "opt-" + o.dest;
    let input;
    if (o.kind === "switch") {
      const label = el("label", { class: "switch", title: o.help });
      input = el("input", { type: "checkbox", id });
      input.checked = keep[o.dest] === true;
      label.append(input, o.flag);
      box.append(label);
    } else {
      const label = el("label", { title: o.help }, o.flag);
      if (o.choices.length) {
        input = el("select", { id });
        input.append(el("option", { value: "" }, `(default${o.default !== null ? ": " + o.default : ""})`));
        o.choices.forEach((c) => input.append(el("option", { value: c }, c)));
      } else if (o.kind === "json") {
        input = el("textarea", { id, rows: "3", placeholder: "paste the JSON" });
      } else {
        input = el("input", { id, placeholder: o.default === null ? "default" : String(o.default) });
      }
      const kept = keep[o.dest];
      if (kept !== undefined) input.value = typeof kept === "object" ? JSON.stringify(kept) : String(kept);
      label.append(input);
      box.append(label);
    }
    Object.assign(input.dataset, { dest: o.dest, kind: o.kind, flag: o.flag });
  }
}

// ---- a shareable address: the inputs in the hash ----
function saveHash() {
  const params = new URLSearchParams();
  for (const id of FIELDS) { const v = $(id).value; if (v) params.set(id, v); }
  let options = {};
  try { options = engineOptions(); } catch (e) { /* an unfinished JSON option is not shared */ }
  if (Object.keys(options).length) params.set("options", JSON.stringify(options));
  history.replaceState(null, "", "#" + params.toString());
  $("share").href = location.href;
}

function restoreHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  for (const id of FIELDS) if (params.has(id)) $(id).value = params.get(id);
  if (params.get("config")) $("config-box").open = true;
  let options = {};
  try { options = JSON.parse(params.get("options") || "{}"); } catch (e) { options = {}; }
  buildEngineOptions(options);
  if (Object.keys(options).length) $("engine-options-box").open = true;
}

// ---- the answers ----
function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

function showFit(doc) {
  const serving = doc.engine && doc.engine.name !== "textbook";
  $("title").textContent = `${doc.model} on ${doc.gpu || $("gpu").value}`;
  const verdict = $("verdict");
  verdict.className = "verdict " + (doc.fits ? "fits" : "no");
  verdict.textContent = doc.verdict || (doc.fits
    ? `Fits: up to ${whole(doc.max_batch)} requests at once at this context; longest context for this concurrency ${whole(doc.max_context)} tokens.`
    : `Does not fit as asked: ${whole(doc.max_batch)} requests at once at this context.`);
  show("num-gpu-blocks", doc.num_gpu_blocks ?? null);
  show("kv-cache-tokens", doc.kv_cache_tokens ?? null);
  show("max-concurrency", doc.max_concurrency ?? null, doc.max_concurrency === undefined ? "–" : `${doc.max_concurrency}x`);
  show("starts", doc.starts ?? null, doc.starts === undefined ? "–" : doc.starts ? "yes" : "no");
  $("engine-error").textContent = doc.error || (doc.starts === false ? "the engine stops at start-up" : "");
  $("log-lines").textContent = (doc.log_lines || []).join("\n") || (serving ? "" : "(the textbook partition prints nothing)");
  const notes = $("notes");
  notes.replaceChildren();
  for (const line of [...(doc.warnings || []), ...(doc.notes || [])]) notes.append(el("li", {}, line));
  for (const s of doc.suggestions || []) notes.append(el("li", {}, typeof s === "string" ? s : JSON.stringify(s)));
  const launch = doc.launch || {};
  $("launch-command").textContent = launch.command || "(no launch command for this answer)";
  $("manifest").textContent = launch.kubernetes || launch.manifest_error || "(no manifest for this answer)";
  const levers = doc.levers || [];
  table("levers", ["lever", "flag", "GPUs", "KV cache / GPU", "freed / GPU", "max concurrency", "added"],
    levers.map((l) => [l.lever, l.flag, l.gpus, bytes(l.kv_cache_bytes), bytes(l.freed_bytes), whole(l.max_concurrency),
      (l.added_concurrency > 0 ? "+" : "") + whole(l.added_concurrency)]),
    levers.map((l) => (l.starts ? "" : "no")));
}

function drawPartition(doc) {
  const box = $("partition");
  const n = doc.gpus.length;
  const legend = 230, width = Math.max(330, 70 + n * 46 + legend), height = 240, top = 10, base = 210, left = 40;
  const bar = Math.min(40, Math.max(8, (width - legend - left) / n - 6));
  const s = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", id: "partition-svg",
    "aria-label": `memory per GPU of ${doc.gpu}` });
  const scale = (b) => (b / doc.memory_bytes) * (base - top);
  s.append(svg("text", { x: 0, y: top + 4 }, (doc.memory_bytes / GiB).toFixed(0) + " GiB"));
  s.append(svg("line", { x1: left - 4, x2: left + n * (bar + 6), y1: top, y2: top, stroke: "#888", "stroke-dasharray": "3 3" }));
  doc.gpus.forEach((parts, i) => {
    let y = base;
    const x = left + i * (bar + 6);
    parts.forEach((p, j) => {
      const h = scale(p.bytes);
      y -= h;
      const r = svg("rect", { x, y, width: bar, height: Math.max(h, 0), fill: COLORS[p.name] || OTHER[j % OTHER.length],
        "data-part": p.name, "data-bytes": p.bytes });
      r.append(svg("title", {}, `GPU ${i}: ${p.name} ${bytes(p.bytes)}`));
      s.append(r);
    });
    s.append(svg("text", { x: x + bar / 2, y: base + 14, "text-anchor": "middle" }, String(i)));
  });
  const legendX = left + n * (bar + 6) + 12;
  doc.gpus[0].forEach((p, j) => {
    const y = top + 8 + j * 18;
    s.append(svg("rect", { x: legendX, y: y - 9, width: 10, height: 10, fill: COLORS[p.name] || OTHER[j % OTHER.length] }));
    const name = p.name.length > 24 ? p.name.slice(0, 23) + "…" : p.name;
    const label = svg("text", { x: legendX + 14, y }, `${name} ${bytes(p.bytes)}`);
    label.append(svg("title", {}, `${p.name}: ${bytes(p.bytes)}`));
    s.append(label);
  });
  s.append(svg("text", { x: left, y: height - 4 }, n > 1 ? `GPU (tp ${doc.tp}, pp ${doc.pp})` : "GPU 0"));
  box.replaceChildren(s);
}

function drawKv(doc, context) {
  const width = 440, height = 240, left = 56, right = 12, top = 12, base = 200;
  const points = doc.points;
  const xmax = doc.max_context, ymax = Math.max(points[points.length - 1].kv_bytes, doc.weights_bytes) * 1.05;
  const X = (c) => left + (c / xmax) * (width - left - right), Y = (b) => base - (b / ymax) * (base - top);
  const s = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", id: "kv-plot-svg",
    "aria-label": "KV cache against context" });
  s.append(svg("line", { x1: left, x2: width - right, y1: base, y2: base, stroke: "#888" }));
  s.append(svg("line", { x1: left, x2: left, y1: top, y2: base, stroke: "#888" }));
  for (let i = 0; i <= 4; i++) {
    const b = (ymax / 4) * i, c = (xmax / 4) * i;
    s.append(svg("text", { x: left - 4, y: Y(b) + 4, "text-anchor": "end" }, (b / GiB).toFixed(b / GiB < 10 ? 1 : 0)));
    s.append(svg("text", { x: X(c), y: base + 14, "text-anchor": "middle" }, c >= 1024 ? Math.round(c / 1024) + "K" : String(Math.round(c))));
  }
  s.append(svg("text", { x: 4, y: top + 2 }, "GiB"));
  s.append(svg("text", { x: width - right, y: height - 4, "text-anchor": "end" }, "context (tokens)"));
  s.append(svg("line", { x1: left, x2: width - right, y1: Y(doc.weights_bytes), y2: Y(doc.weights_bytes), stroke: "#222",
    "stroke-dasharray": "5 4" }));
  s.append(svg("text", { x: left + 4, y: Y(doc.weights_bytes) - 4 }, `weights ${bytes(doc.weights_bytes)}`));
  s.append(svg("polyline", { fill: "none", stroke: COLORS["KV cache"], "stroke-width": 2,
    points: points.map((p) => `${X(p.context).toFixed(1)},${Y(p.kv_bytes).toFixed(1)}`).join(" ") }));
  if (context && context <= xmax) {
    s.append(svg("line", { x1: X(context), x2: X(context), y1: top, y2: base, stroke: "#C44E52", "stroke-dasharray": "2 3" }));
    const far = X(context) > width * 0.7;
    s.append(svg("text", { x: X(context) + (far ? -3 : 3), y: base - 6, "text-anchor": far ? "end" : "start" }, `${whole(context)} tokens`));
  }
  box("kv-plot", s);
  $("kv-plot-note").textContent = `one sequence, per GPU: ` + (doc.crossover
    ? `its KV cache outgrows the weights from ${whole(doc.crossover)} tokens`
    : `its KV cache stays below the weights up to the model's ${whole(doc.max_context)} tokens`);
}
const box = (id, node) => $(id).replaceChildren(node);

function showCompare(doc) {
  table("compare", ["engine", "starts", "weights / GPU", "KV pool / GPU", "KV tokens", "max concurrency", "rule"],
    doc.engines.map((r) => [r.engine, r.starts ? "yes" : "no", bytes(r.weights_bytes), bytes(r.kv_budget_bytes),
      whole(r.kv_cache_tokens), r.max_concurrency, r.budget_rule]),
    doc.engines.map((r) => (r.starts ? "" : "no")));
  for (const r of doc.not_compared) $("compare").append(el("caption", {}, `${r.engine}: ${r.reason}`));
}

function showPlan(doc) {
  const rows = doc.plans.filter((p) => p.serves).slice(0, 10);
  table("plan", ["GPU", "GPUs", "TP", "PP", "replicas", "weights", "KV", "max concurrency", "$ / hour"],
    rows.map((p) => [p.gpu, p.num_gpus, p.tp, p.pp, p.replicas, p.weights_dtype, p.kv_dtype, whole(p.max_concurrency),
      p.price_per_hour === null ? "" : p.price_per_hour.toFixed(2)]));
  if (!rows.length) tableMessage("plan", `no deployment of at most 64 GPUs serves ${whole(doc.concurrency)} requests of ${whole(doc.context)} tokens`);
}

async function update() {
  const mine = ++asked;
  saveHash();
  $("status").textContent = "working…";
  try {
    const model = modelInput();
    const launch = text("launch");
    const gpu = text("gpu"), numGpus = orNull(text("num-gpus"));
    let fit, part;
    if (launch) {
      const body = { command: launch, gpu };
      [fit, part] = await Promise.all([api("explain", body), api("explain/partition", body)]);
    } else {
      const body = { ...model, gpu, num_gpus: numGpus, engine: $("engine").value, context: orNull(text("context")),
        batch: text("batch") || "1", weights_dtype: text("weights-dtype") || "auto", kv_dtype: text("kv-dtype") || "auto",
        options: engineOptions() };
      [fit, part] = await Promise.all([api("fit", body), api("partition", body)]);
    }
    if (mine !== asked) return;
    showError("");
    showFit(fit);
    drawPartition(part);
    // the KV figures, the comparison and the plan for the same model and context
    const which = launch ? { model: fit.model } : model;
    const context = fit.max_model_len ?? fit.context ?? fit.n_ctx ?? null;
    const kvDtype = launch ? "auto" : text("kv-dtype") || "auto";
    const tp = fit.tp ?? (launch ? 1 : Number(numGpus || 1)); // the engine's own figure when its document has one
    const [kv, curve] = await Promise.all([
      api("kv", { ...which, context, kv_dtype: kvDtype, tp }),
      api("kv/curve", { ...which, kv_dtype: kvDtype, tp }),
    ]);
    if (mine !== asked) return;
    show("kv-per-token", kv.kv_bytes_per_token, bytes(kv.kv_bytes_per_token));
    show("kv-per-sequence", kv.kv_bytes_per_sequence, bytes(kv.kv_bytes_per_sequence));
    drawKv(curve, kv.context);
    $("status").textContent = "";
    const plain = { ...which, gpu, context: context || 8192 };
    api("compare", { ...plain, kv_dtype: kvDtype === "auto" || kvDtype === "fp8" ? kvDtype : "auto" })
      .then((doc) => mine === asked && showCompare(doc), (e) => mine === asked && tableMessage("compare", e.message));
    const searched = engines.find((e) => e.name === fit.engine.name && e.serving) ? fit.engine.name : "vllm";
    api("plan", { ...which, concurrency: launch ? 1 : text("batch") || "1", context: context || 8192, engine: searched })
      .then((doc) => mine === asked && showPlan(doc), (e) => mine === asked && tableMessage("plan", e.message));
  } catch (e) {
    if (mine !== asked) return;
    showError(e.message);
    $("status").textContent = "";
  }
}

function later() {
  clearTimeout(timer);
  timer = setTimeout(update, 300);
}

async function copy(id) {
  const value = $(id).textContent;
  try { await navigator.clipboard.writeText(value); } catch (e) {
    const range = document.createRange();
    range.selectNodeContents($(id));
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    document.execCommand("copy");
  }
  $("status").textContent = "copied";
}

async function start() {
  const [models, gpus, engineList] = await Promise.all([api("models"), api("gpus"), api("engines")]);
  engines = engineList;
  const list = $("model-list");
  for (const m of models) for (const name of [m.id, ...m.aliases]) list.append(el("option", { value: name }));
  for (const g of gpus) for (const name of [g.name, ...g.aliases]) $("gpu-list").append(el("option", { value: name }));
  for (const e of engines) $("engine").append(el("option", { value: e.name }, e.label));
  restoreHash();
  $("inputs").addEventListener("input", later);
  $("inputs").addEventListener("change", (event) => {
    if (event.target.id === "engine") buildEngineOptions();
    later();
  });
  $("copy-command").addEventListener("click", () => copy("launch-command"));
  $("copy-manifest").addEventListener("click", () => copy("manifest"));
  window.addEventListener("hashchange", () => { restoreHash(); later(); });
  await update();
}

document.addEventListener("DOMContentLoaded", () => start().catch((e) => showError(e.message)));

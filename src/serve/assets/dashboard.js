// redbike serve's dashboard: polls the JSON API and draws it. Every text that comes
// from Redis (job ids, notes, outputs) goes in with textContent, never innerHTML.
"use strict";

const POLL_MS = 2000;
let timer = null;

function text(tag, value, cls) {
  const el = document.createElement(tag);
  el.textContent = value === null || value === undefined ? "" : String(value);
  if (cls) el.className = cls;
  return el;
}

function jobLink(id) {
  const a = document.createElement("a");
  a.href = "#job=" + encodeURIComponent(id);
  a.textContent = id;
  a.className = "jobid";
  return a;
}

function when(ts) {
  if (ts === null || ts === undefined) return "";
  return new Date(ts * 1000).toISOString().replace(".000Z", "Z");
}

function ago(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const s = Math.max(0, Math.round(seconds));
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return Math.round(s / 3600) + " h";
}

// Fills tbody `id` with one row per item; `cells` gives a row's cells (strings or nodes).
function fill(id, items, cells, emptyText) {
  const body = document.querySelector("#" + id + " tbody");
  const rows = [];
  for (const item of items) {
    const tr = document.createElement("tr");
    for (const c of cells(item)) {
      const td = document.createElement("td");
      if (c instanceof Node) td.appendChild(c);
      else td.textContent = c === null || c === undefined ? "" : String(c);
      tr.appendChild(td);
    }
    rows.push(tr);
  }
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    const td = text("td", emptyText, "empty");
    td.colSpan = 8;
    tr.appendChild(td);
    rows.push(tr);
  }
  body.replaceChildren(...rows);
}

function banner(message) {
  const b = document.getElementById("banner");
  if (message) {
    b.textContent = message;
    b.hidden = false;
  } else {
    b.hidden = true;
  }
}

async function getJson(path) {
  const r = await fetch(path, { cache: "no-store" });
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) {
    const why = body && body.error ? body.error : "HTTP " + r.status;
    const err = new Error(why);
    err.status = r.status;
    throw err;
  }
  return body;
}

function drawOverview(o) {
  document.getElementById("prefix").textContent = o.prefix;
  document.getElementById("summary").textContent =
    o.schedules + " schedules · " + o.timeline + " on the timeline · " + o.due + " due · " +
    o.dispatchers + " dispatchers · " + o.workers + " workers · " + when(o.time);
  document.getElementById("halted").hidden = !o.halted;
  fill("queues", o.queues, q => [q.queue, q.length, ago(q.oldest_age), q.running, q.workers,
    q.runs_last_minute, q.failures_last_minute, q.paused_since === null ? "" : "since " + when(q.paused_since)],
    "no queue seen");
  document.getElementById("running-total").textContent = "(" + o.running_total + ")";
  fill("running", o.running, r => [jobLink(r.jobid), r.started === null ? "" : ago(o.time - r.started), r.timeout + " s"],
    "nothing runs");
  fill("upcoming", o.upcoming, u => [jobLink(u.jobid), when(u.due)], "nothing on the timeline");
  document.getElementById("failures-total").textContent = "(" + o.failures_total + " jobs)";
  fill("failures", o.failures, f => [jobLink(f.jobid), f.event, when(f.at), text("span", f.detail)], "no failure");
  document.getElementById("paused-total").textContent = "(" + o.paused_total + ")";
  const paused = o.paused_jobs.map(p => ({ id: p.jobid, since: p.since, note: p.note }));
  for (const q of Object.keys(o.paused_queues)) paused.push({ queue: q, since: o.paused_queues[q], note: "" });
  fill("paused", paused, p => [p.id !== undefined ? jobLink(p.id) : "queue " + p.queue, when(p.since), p.note],
    "nothing paused");
}

function drawPs(list) {
  fill("alive", list, p => [p.kind, p.host, p.pid, (p.queues || []).join(":"), p.version],
    "no dispatcher or worker registered");
}

function drawJob(id, info, history, next) {
  document.getElementById("job-id").textContent = id;
  const dl = document.getElementById("job-fields");
  const items = [];
  const fields = ["schedule", "status", "next_run_utc", "queue", "queued", "working",
    "lease_seconds_left", "last_failure", "run_asked"];
  for (const f of fields) {
    items.push(text("dt", f));
    items.push(text("dd", info[f]));
  }
  items.push(text("dt", "paused"));
  items.push(text("dd", info.paused ? "since " + when(info.paused.since) + " " + (info.paused.note || "") : "no"));
  dl.replaceChildren(...items);
  fill("job-next", next.runs, r => [r.unix, r.utc],
    next.unreadable ? "its schedule cannot be read: " + next.unreadable : "no run ahead");
  fill("job-history", history, e => [e.outcome, when(e.end),
    e.duration === null || e.duration === undefined ? "" : e.duration.toFixed(3) + " s",
    (e.host || "") + (e.pid ? " " + e.pid : ""), text("span", e.tail || e.detail || "")], "no history");
  for (const td of document.querySelectorAll("#job-history td:last-child")) td.className = "text";
}

function currentJob() {
  const m = location.hash.match(/^#job=(.*)$/);
  return m ? decodeURIComponent(m[1]) : null;
}

async function refresh() {
  const job = currentJob();
  document.getElementById("home").hidden = job !== null;
  document.getElementById("job").hidden = job === null;
  try {
    if (job === null) {
      const [o, ps] = await Promise.all([getJson("/api/v1/overview"), getJson("/api/v1/ps")]);
      drawOverview(o);
      drawPs(ps);
    } else {
      const enc = encodeURIComponent(job);
      const [info, history, next] = await Promise.all([
        getJson("/api/v1/jobs/" + enc),
        getJson("/api/v1/history?count=20&job=" + enc),
        getJson("/api/v1/jobs/" + enc + "/next?count=5"),
      ]);
      drawJob(job, info, history, next);
    }
    banner(null);
  } catch (e) {
    banner(e.status === 503 ? "Redis cannot be reached: " + e.message : "Cannot read: " + e.message);
  }
}

function schedule() {
  if (timer) clearTimeout(timer);
  timer = setTimeout(async () => { await refresh(); schedule(); }, POLL_MS);
}

async function control(action) {
  const job = currentJob();
  const out = document.getElementById("control-result");
  const token = sessionStorage.getItem("redbike-token") || "";
  const r = await fetch("/api/v1/jobs/" + encodeURIComponent(job) + "/" + action, {
    method: "POST",
    headers: token ? { "Authorization": "Bearer " + token } : {},
  });
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  out.textContent = r.ok ? body.message : "refused: " + (body && body.error ? body.error : "HTTP " + r.status);
  out.dataset.status = String(r.status);
  refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("run-now").addEventListener("click", () => control("run"));
  document.getElementById("pause").addEventListener("click", () => control("pause"));
  document.getElementById("resume").addEventListener("click", () => control("resume"));
  document.getElementById("token-save").addEventListener("click", () => {
    sessionStorage.setItem("redbike-token", document.getElementById("token").value);
    document.getElementById("token").value = "";
  });
  window.addEventListener("hashchange", () => {
    document.getElementById("control-result").textContent = "";
    refresh();
  });
  refresh();
  schedule();
});

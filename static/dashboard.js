// The live page: draws the history embedded in the page, then applies the events the
// server pushes over the WebSocket (see dashboard/live.py for their shape). No polling.
"use strict";

const config = JSON.parse(document.getElementById("page-config").textContent);
const migrations = new Map();  // id -> latest migration payload
const MAX_POINTS = 5000;

// Fractions (0–1) arrive from the server; this is the page's one conversion to percent.
const percent = (fraction) => fraction * 100;
const pct = (fraction) => percent(fraction).toFixed(1) + " %";
const el = (id) => document.getElementById(id);

function csrfToken() {
  return document.querySelector("input[name=csrfmiddlewaretoken]").value;
}

function drawChart(rounds) {
  const x = rounds.map((r) => r.at);
  const traces = [
    {x: x, y: rounds.map((r) => percent(r.imbalance)), name: "imbalance", mode: "lines+markers",
     line: {color: "#1f6feb"}, marker: {size: 4}},
    {x: x.slice(), y: rounds.map((r) => percent(r.threshold)), name: "threshold", mode: "lines",
     line: {color: "#d1242f", dash: "dash"}},
  ];
  const layout = {margin: {t: 10, r: 10, b: 40, l: 50}, height: 300, yaxis: {title: {text: "%"}, rangemode: "tozero"},
                  legend: {orientation: "h"}};
  Plotly.newPlot("chart", traces, layout, {displaylogo: false, responsive: true});
}

function showRound(r) {
  el("imbalance").textContent = pct(r.imbalance);
  el("threshold").textContent = pct(r.threshold);
  el("hold").textContent = `${r.hold_count} of ${r.hold_duration} rounds above ${pct(r.threshold)}`;
  // What really blocks a new plan, as the round recorded it (dashboard/rounds.py waiting_reason).
  const waiting = r.explanation.waiting ? ` Waiting: ${r.explanation.waiting}.` : "";
  el("decision").textContent = `${r.decision}: ${r.explanation.reason}${waiting}`;
  el("decision").dataset.decision = r.decision;
  el("last-round").textContent = new Date(r.at).toLocaleTimeString();
  const body = el("nodes").tBodies[0];
  body.replaceChildren(...Object.entries(r.node_usage).map(([name, u]) => {
    const row = document.createElement("tr");
    row.innerHTML = `<td></td><td>${bar(u.cpu)}</td><td>${bar(u.memory)}</td>`;
    row.firstChild.textContent = name;
    return row;
  }));
}

function bar(fraction) {
  const width = Math.min(100, Math.max(0, percent(fraction))).toFixed(1);
  return `<div class="bar"><div style="width:${width}%"></div><span>${pct(fraction)}</span></div>`;
}

function addRound(r) {
  Plotly.extendTraces("chart", {x: [[r.at], [r.at]], y: [[percent(r.imbalance)], [percent(r.threshold)]]}, [0, 1], MAX_POINTS);
  showRound(r);
}

function showMigrations() {
  const all = [...migrations.values()].sort((a, b) => b.id - a.id);
  // Ranked as the plan computed them: plan, then step.
  const pending = all.filter((m) => m.state === "suggested").sort((a, b) => (a.plan - b.plan) || (a.step - b.step));
  // Keep the items already shown: a push must not wipe a rejection reason being typed.
  const shown = new Map([...el("recommendations").children].map((li) => [li.dataset.id, li]));
  el("recommendations").replaceChildren(...pending.map((m) => shown.get(String(m.id)) || recommendationItem(m)));
  el("no-recommendations").hidden = pending.length > 0;
  el("apply-all").hidden = pending.length === 0 || config.read_only || !config.can_decide;
  el("plan-summary").hidden = pending.length === 0;
  if (pending.length) {
    const first = pending[0];
    el("plan-summary").textContent = `Plan ${first.plan}: ${pending.length} moves, total gain ${pct(first.plan_gain)}` +
      ` vs margin ${pct(first.margin)}. A move marked "computed after #N" assumes #N is done first.`;
  }
  el("migrations").tBodies[0].replaceChildren(...all.filter((m) => m.state !== "suggested").slice(0, 20).map(migrationRow));
}

function recommendationItem(m) {
  const li = document.createElement("li");
  li.dataset.id = m.id;
  li.innerHTML = `<div class="math"></div>
    <button class="approve">Approve</button>
    <input class="reason" placeholder="reason (optional)" maxlength="500">
    <button class="reject">Reject</button> <span class="error"></span>`;
  const behind = [...migrations.values()].find((o) => o.plan === m.plan && o.step === m.after);
  li.dataset.priority = m.priority;
  li.querySelector(".math").textContent =
    `#${m.id} priority ${m.priority} · ${m.guests.join(", ")}: ${m.source} → ${m.target}` +
    ` · imbalance ${pct(m.imbalance_before)} → ${pct(m.imbalance_after)} · step gain ${pct(m.relative_gain)}` +
    (behind ? ` · computed after #${behind.id}` : "") + ` · ${m.method}`;
  const approve = li.querySelector(".approve");
  approve.onclick = () => decide(li, config.approve, m.id, {});
  approve.hidden = config.read_only;  // a what-if cluster only shows what would be recommended
  // A viewer sees what waits for a decision, without buttons the server would refuse.
  li.querySelectorAll("button, input").forEach((e) => { e.hidden = e.hidden || !config.can_decide; });
  li.querySelector(".reject").onclick = () => decide(li, config.reject, m.id, {reason: li.querySelector(".reason").value});
  return li;
}

function migrationRow(m) {
  const row = document.createElement("tr");
  row.dataset.id = m.id;
  row.className = "state-" + m.state;
  const progress = m.state === "running" ? ` ${Math.round(percent(m.progress))} %` : "";
  const cells = [m.id, m.guests.join(", "), `${m.source} → ${m.target}`,
                 `${pct(m.imbalance_before)} → ${pct(m.imbalance_after)}`, m.state + progress,
                 m.automatic ? "automatic" : (m.decided_by || "")];
  cells.forEach((text) => { const td = document.createElement("td"); td.textContent = text; row.append(td); });
  row.cells[4].className = "state";
  if (m.reason) row.title = m.reason;
  return row;
}

async function applyAll() {
  el("apply-all").disabled = true;
  const response = await fetch(config.approve_all, {
    method: "POST", headers: {"X-CSRFToken": csrfToken()}, credentials: "same-origin"});
  const answer = await response.json();
  (answer.approved || []).forEach(setMigration);
  el("apply-all-error").textContent = response.ok ? "" : (answer.error || "");
  el("apply-all").disabled = false;
}

function setMigration(m) {
  migrations.set(m.id, m);
  showMigrations();
}

async function decide(li, template, id, fields) {
  li.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  const response = await fetch(template.replace("/0/", `/${id}/`), {
    method: "POST", headers: {"X-CSRFToken": csrfToken()}, body: new URLSearchParams(fields),
    credentials: "same-origin"});
  const answer = await response.json();
  if (answer.migration) setMigration(answer.migration);
  if (!response.ok) {
    li.querySelector(".error").textContent = answer.error || JSON.stringify(answer.errors);
    li.querySelectorAll("button").forEach((b) => { b.disabled = false; });
  }
}

function showSource(source) {
  // The cluster could not be collected: say why, and that the figures are from before.
  const box = el("source-error");
  box.hidden = !source.error;
  box.textContent = source.error ? `Source unreachable or refused since ${new Date(source.at).toLocaleTimeString()}: ${source.error}. Figures below are from the last good collection.` : "";
}

function load(state) {
  showSource(state.source);
  drawChart(state.rounds);
  if (state.rounds.length) showRound(state.rounds[state.rounds.length - 1]);
  migrations.clear();
  state.migrations.forEach((m) => migrations.set(m.id, m));
  showMigrations();
}

function connect(delay) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/clusters/${config.cluster}/`);
  el("ws-state").textContent = "connecting";
  socket.onopen = async () => {
    // Whatever happened between rendering the page (or losing the socket) and now was
    // pushed to nobody: fetch the state once the socket listens, then pushes keep it current.
    load(await (await fetch(config.api, {credentials: "same-origin"})).json());
    delay = 1000;
    el("live-paused").hidden = true;
    el("ws-state").textContent = "open";
  };
  socket.onmessage = (event) => {
    const data = JSON.parse(event.data);
    if (data.type === "round") addRound(data);
    else if (data.type === "migration") setMigration(data);
    else if (data.type === "source") showSource(data);
  };
  socket.onclose = (event) => {
    if (event.code === 4401 || event.code === 4403) {  // logged out, or no role: reconnecting cannot help
      el("ws-state").textContent = event.code === 4401 ? "logged out" : "not allowed";
      return;
    }
    // The server or its message broker is away: say so, keep what is shown, try again later.
    const wait = delay * (0.5 + Math.random());  // jitter: pages do not all come back in the same instant
    el("ws-state").textContent = `paused, retrying in ${Math.round(wait / 1000)} s`;
    el("live-paused").hidden = false;
    setTimeout(() => connect(Math.min(delay * 2, 30000)), wait);
  };
}

async function toggleStop(all) {
  // One click stops (automation paused, approved moves expire, running ones aborted); a second lifts it.
  const stopped = all ? config.all_stopped : config.stopped;
  const response = await fetch(all ? config.emergency_stop_all : config.emergency_stop, {
    method: "POST", headers: {"X-CSRFToken": csrfToken()}, credentials: "same-origin",
    body: new URLSearchParams({stop: stopped ? "0" : "1"})});
  if (!response.ok) return;
  config.stopped = !stopped;
  if (all) config.all_stopped = !stopped;
  el("emergency-stop").textContent = config.stopped ? "Lift the emergency stop" : "Emergency stop";
  el("emergency-stop-all").textContent = config.all_stopped ? "Lift the stop on all clusters" : "Stop all clusters";
  el("stop-state").textContent = config.stopped ? "Stopped: automation paused, nothing starts." : "";
}

el("apply-all").onclick = applyAll;
if (el("emergency-stop")) {
  el("emergency-stop").onclick = () => toggleStop(false);
  el("emergency-stop-all").onclick = () => toggleStop(true);
}
load(JSON.parse(document.getElementById("history").textContent));
connect(1000);

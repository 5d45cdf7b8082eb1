// The live page: fetches the history once the WebSocket listens, then applies the events
// the server pushes over it (see dashboard/live.py for their shape). No polling.
// Times go through times.js: the browser's time zone, labelled, UTC in the tooltip.
"use strict";

const config = JSON.parse(document.getElementById("page-config").textContent);
const migrations = new Map();  // id -> latest migration payload
const MAX_POINTS = 5000;
let chartRounds = [];  // what the chart shows, or will show once Plotly has loaded
let plotly = null;

// Fractions (0–1) arrive from the server; this is the page's one conversion to percent.
const percent = (fraction) => fraction * 100;
const pct = (fraction) => percent(fraction).toFixed(1) + " %";
const el = (id) => document.getElementById(id);

// Plotly draws a date string's wall clock as written, whatever its offset: hand it local wall time.
function localWall(iso) {
  const at = new Date(iso);
  return new Date(at.getTime() - at.getTimezoneOffset() * 60000).toISOString().slice(0, 23).replace("T", " ");
}

// The engine's decision codes (kept in the API) in the admin's words.
const DECISION_WORDS = {
  "migrate": "Move recommended",
  "below-threshold": "Balanced enough",
  "holding": "Above the threshold, waiting for the hold duration",
  "no-candidate": "Nothing can move",
  "below-margin": "No move gains enough",
  "motion-in-flight": "Waiting: a migration is running",
  "disabled": "Balancing is off",
  "no-pressure-data": "No pressure figures from this source",
  "no-pressure": "No guest stalls",
  "pressure-wait": "Waiting: pressure moves at most once a minute",
};

function csrfToken() {
  return document.querySelector("input[name=csrfmiddlewaretoken]").value;
}

function chartColours() {
  const style = getComputedStyle(document.documentElement);
  return {text: style.getPropertyValue("--text").trim(), line: style.getPropertyValue("--line").trim(),
          bar: style.getPropertyValue("--bar").trim(), threshold: style.getPropertyValue("--threshold").trim()};
}

// Plotly (1.2 MB) loads once the status is on screen: its parse must not hold back the first paint.
function withPlotly() {
  plotly ??= new Promise((resolve) => {
    const script = document.createElement("script");
    script.src = config.plotly;
    script.onload = resolve;
    document.head.append(script);
  });
  return plotly;
}

function drawChart(rounds) {
  const colours = chartColours();
  const x = rounds.map((r) => localWall(r.at));
  const traces = [
    {x: x, y: rounds.map((r) => percent(r.imbalance)), name: "imbalance", mode: "lines+markers",
     line: {color: colours.bar}, marker: {size: 4}},
    {x: x.slice(), y: rounds.map((r) => percent(r.threshold)), name: "threshold",
     mode: rounds.length > 1 ? "lines" : "lines+markers",  // a single point: a line has no length to show
     line: {color: colours.threshold, dash: "dash", width: 2}},
  ];
  const layout = {margin: {t: 30, r: 10, b: 40, l: 50}, height: 300, paper_bgcolor: "rgba(0,0,0,0)",
                  plot_bgcolor: "rgba(0,0,0,0)", font: {color: colours.text},
                  xaxis: {title: {text: `time (${ZONE})`}, gridcolor: colours.line, tickformat: "%H:%M:%S",
                          hoverformat: "%Y-%m-%d %H:%M:%S"},
                  yaxis: {title: {text: "%"}, rangemode: "tozero", gridcolor: colours.line},
                  legend: {orientation: "h", x: 0, y: 1.02, yanchor: "bottom"}};
  Plotly.newPlot("chart", traces, layout, {displaylogo: false, responsive: true});
}

function showRound(r) {
  el("imbalance").textContent = pct(r.imbalance);
  el("threshold").textContent = pct(r.threshold);
  el("hold").textContent = `${r.hold_count} of ${r.hold_duration} rounds above ${pct(r.threshold)}`;
  // What really blocks a new plan, as the round recorded it (dashboard/rounds.py waiting_reason).
  const waiting = r.explanation.waiting ? ` Waiting: ${r.explanation.waiting}.` : "";
  const words = document.createElement("strong");
  words.textContent = DECISION_WORDS[r.decision] || r.decision;
  const reason = document.createElement("span");
  reason.className = "reason";
  const period = r.explanation.usage_period;
  const figures = period == null ? "" : period > 0 ? ` Usage figures: mean of the last ${Math.round(period / 60)} min.` :
    " Usage figures: the latest values.";
  reason.textContent = ` ${r.explanation.reason}${waiting}${figures}`;
  el("decision").replaceChildren(words, reason);
  el("decision").dataset.decision = r.decision;
  stamp(el("last-round"), r.at);
  stamp(el("last-collected"), r.at);  // a round runs on the snapshot collected just before it
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
  if (el("chart").data) {
    const at = localWall(r.at);
    Plotly.extendTraces("chart", {x: [[at], [at]], y: [[percent(r.imbalance)], [percent(r.threshold)]]}, [0, 1], MAX_POINTS);
  } else {
    chartRounds.push(r);  // drawn with the rest when Plotly is ready
  }
  showRound(r);
}

function showMigrations() {
  const all = [...migrations.values()].sort((a, b) => b.id - a.id);
  // Ranked as the plan computed them: plan, then step.
  const pending = all.filter((m) => m.state === "suggested").sort((a, b) => (a.plan - b.plan) || (a.step - b.step));
  // Keep the items already shown: a push must not wipe a rejection reason being typed, nor
  // a lost race's explanation (kept until the next page load).
  const shown = new Map([...el("recommendations").children].map((li) => [li.dataset.id, li]));
  const lost = [...shown.values()].filter((li) => li.dataset.keep);
  const items = pending.map((m) => shown.get(String(m.id)) || recommendationItem(m));
  el("recommendations").replaceChildren(...lost.filter((li) => !items.includes(li)), ...items);
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
    <div class="actions">
      <button class="approve" type="button">Approve</button>
      <div class="reject-box">
        <label for="reason-${m.id}">Reason to reject (required, kept in the audit trail)</label>
        <input class="reason" id="reason-${m.id}" maxlength="500" required aria-describedby="error-${m.id}">
        <button class="reject" type="button">Reject</button>
      </div>
    </div>
    <p class="error" id="error-${m.id}" role="alert" hidden></p>`;
  const behind = [...migrations.values()].find((o) => o.plan === m.plan && o.step === m.after);
  li.dataset.priority = m.priority;
  li.querySelector(".math").textContent =
    `#${m.id} priority ${m.priority} · ${m.guests.join(", ")}: ${m.source} → ${m.target}` +
    ` · imbalance ${pct(m.imbalance_before)} → ${pct(m.imbalance_after)} · step gain ${pct(m.relative_gain)}` +
    (behind ? ` · computed after #${behind.id}` : "") + ` · ${m.method}` +
    (m.downtime != null ? ` · restart, ~${Math.round(m.downtime)} s downtime (a container cannot live-migrate)` : "");
  // A viewer, or anyone on a read-only what-if cluster, sees what waits without the buttons.
  if (!config.can_decide) {
    li.querySelector(".actions").remove();
    return li;
  }
  li.querySelector(".approve").onclick = () => decide(li, config.approve, m.id, {});
  li.querySelector(".reject").onclick = () => {
    const reason = li.querySelector(".reason").value.trim();
    if (!reason) return showError(li, "A reason is required: say why, for the audit trail.");
    decide(li, config.reject, m.id, {reason: reason});
  };
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
  if (m.state === "running" && config.can_decide) {  // a migration stuck after an outage
    row.cells[4].insertAdjacentHTML("beforeend", ' <button class="mark-failed">Mark failed</button> <span class="error"></span>');
    row.querySelector(".mark-failed").onclick = () => decide(row, config.mark_failed, m.id, {});
  }
  if (m.reason) {
    row.title = m.reason;
    const why = document.createElement("span");  // shown, not only in a tooltip
    why.className = "why";
    why.textContent = m.reason;
    row.cells[4].append(why);
  }
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

function showError(li, text) {
  const box = li.querySelector(".error");
  box.textContent = text;
  box.hidden = !text;
  li.querySelector(".reason")?.setAttribute("aria-invalid", text ? "true" : "false");
}

// An API refusal as a sentence: {"error": "..."} or a form's {"errors": {field: [{message}]}}.
function refusal(answer, status) {
  if (answer.error) return answer.error;
  const messages = Object.values(answer.errors || {}).flat().map((e) => e.message);
  return messages.length ? messages.join("; ") : `the server refused (HTTP ${status})`;
}

async function decide(li, template, id, fields) {
  li.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  showError(li, "");
  let response, answer;
  try {
    response = await fetch(template.replace("/0/", `/${id}/`), {
      method: "POST", headers: {"X-CSRFToken": csrfToken()}, body: new URLSearchParams(fields),
      credentials: "same-origin"});
    answer = await response.json();
  } catch (error) {
    showError(li, `Not sent: the server cannot be reached (${error.message}). Try again.`);
    li.querySelectorAll("button").forEach((b) => { b.disabled = false; });
    return;
  }
  if (response.status === 409) {
    // Lost the race (another admin, a newer round, or expiry): keep the card and say why, in place.
    li.classList.add("lost");
    li.querySelector(".actions")?.remove();
    showError(li, `Too late: ${answer.error}.`);
    li.dataset.keep = "true";
    return;
  }
  if (answer.migration) setMigration(answer.migration);
  if (!response.ok) {
    showError(li, response.status === 401 ? "You are signed out: log in again to decide." : refusal(answer, response.status));
    li.querySelectorAll("button").forEach((b) => { b.disabled = false; });
  }
}

function showSource(source) {
  // The cluster could not be collected: say why, and that the figures are from before.
  const box = el("source-error");
  box.hidden = !source.error;
  box.textContent = source.error ? `Source unreachable or refused since ${clock(source.at)}: ${source.error}. Figures below are from the last good collection.` : "";
}

function load(state) {
  showSource(state.source);
  if (state.rounds.length) showRound(state.rounds[state.rounds.length - 1]);
  chartRounds = state.rounds;
  withPlotly().then(() => drawChart(chartRounds));
  migrations.clear();
  state.migrations.forEach((m) => migrations.set(m.id, m));
  showMigrations();
}

function setLive(state, text) {
  el("ws-state").dataset.state = state;
  el("ws-state").textContent = text;
}

function connect(delay) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/clusters/${config.cluster}/`);
  setLive("connecting", "connecting");
  socket.onopen = async () => {
    // Whatever happened between rendering the page (or losing the socket) and now was
    // pushed to nobody: fetch the state once the socket listens, then pushes keep it current.
    // This is the page's only copy of the history: the HTML embeds none.
    const response = await fetch(config.api, {credentials: "same-origin"});
    if (!response.ok) return;  // signed out meanwhile: the socket's close says so
    load(await response.json());
    delay = 1000;
    el("live-paused").hidden = true;
    setLive("open", "open");
  };
  socket.onmessage = (event) => {
    const data = JSON.parse(event.data);
    if (data.type === "round") addRound(data);
    else if (data.type === "migration") setMigration(data);
    else if (data.type === "source") showSource(data);
  };
  socket.onclose = (event) => {
    if (event.code === 4401) {  // the session ended (logout in another tab, expiry): reconnecting cannot help
      setLive("signed-out", "signed out");
      el("signed-out").hidden = false;
      document.querySelectorAll("#recommendations .actions").forEach((e) => e.remove());
      return;
    }
    if (event.code === 4403) {
      setLive("not-allowed", "not allowed");
      return;
    }
    // The server or its message broker is away: say so, keep what is shown, try again later.
    const wait = delay * (0.5 + Math.random());  // jitter: pages do not all come back in the same instant
    setLive("paused", `paused, retrying in ${Math.round(wait / 1000)} s`);
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
connect(1000);

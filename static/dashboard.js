// The live page: fetches the history once the WebSocket listens, then applies the events
// the server pushes over it (see dashboard/live/sender.py for their shape). No polling.
// Times go through times.js: the browser's time zone, labelled, UTC in the tooltip.
"use strict";

const config = JSON.parse(document.getElementById("page-config").textContent);
const migrations = new Map();  // id -> latest migration payload
// The trend's ranges, each fetched from the API once (then kept current by the pushes):
// range name -> {points, markers}. `range` is the one shown; trend.js draws it.
const ranges = new Map();
let range = "3h";
let stop = {};  // the emergency stops as the API says them: {here, all, by, at}
let stopNews = 0;  // stops set or lifted since the page loaded (stopChanged)

// Fractions (0–1) arrive from the server: percent() and pct() are units.js's.
const el = (id) => document.getElementById(id);

// The engine's decision codes (kept in the API) in the admin's words: dashboard/wording.py's table.
const DECISION_WORDS = JSON.parse(el("decision-words").textContent);
// What each recommendation is for (evacuation, rule fix, …) in words: the same table's KINDS.
const KIND_WORDS = JSON.parse(el("kind-words").textContent);

function csrfToken() {
  return document.querySelector("input[name=csrfmiddlewaretoken]").value;
}

async function showRange(name) {
  range = name;
  document.querySelectorAll("#ranges button").forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.range === name)));
  if (!ranges.has(name)) {
    const response = await fetch(`${config.history}?range=${name}`, {credentials: "same-origin"});
    if (!response.ok) return;
    ranges.set(name, await response.json());
  }
  if (range === name) trendShow(ranges.get(name), name);
}

// A migration that starts is marked on the chart where it started.
function markStarted(m) {
  const mark = {id: m.id, at: new Date().toISOString(), guests: m.guests, source: m.source, target: m.target,
                state: m.state, approved_by: m.automatic ? "automatic" : m.decided_by,
                imbalance_before: m.imbalance_before};
  let shown = false;
  ranges.forEach((data, name) => {
    if (data.markers.some((o) => o.id === m.id)) return;
    data.markers.push(mark);
    shown ||= name === range;
  });
  if (shown) trendMark(mark);
}

// The hold counter restarts once a round acts, so "1 of 3 rounds above" would read wrong while a
// plan is kept for the tenth minute: the count shows only while the round is still holding.
function holdWords(r) {
  const threshold = pct(r.threshold);
  const rounds = `${r.hold_duration} round${r.hold_duration === 1 ? "" : "s"}`;
  if (r.imbalance <= r.threshold) return `at or below ${threshold}`;
  // While a plan waits for a decision the counter only paces its comparison with a fresh plan:
  // shown as "1 of 3", it restarted after every comparison as if no plan were there.
  if (r.explanation.kept_plan) return `above ${threshold}, plan ${r.explanation.kept_plan} waiting; compared with a fresh plan every ${rounds}`;
  if (r.decision === "holding") return `${r.hold_count} of ${r.hold_duration} rounds above ${threshold}`;
  return `above ${threshold}, hold duration ${rounds} served`;
}

let planNow = null;  // the last round's plan figures (crs.verdict.PlanFigures): the status line and the bars' marks

function showRound(r) {
  // `kept`: this round's figures of a plan made before (kept, or partly under way), not its own new plan.
  const computed = r.explanation.plan_figures;
  planNow = computed ? {...computed, kept: r.explanation.plan !== computed.plan} : null;
  el("imbalance").textContent = pct(r.imbalance);
  el("threshold").textContent = pct(r.threshold);
  el("hold").textContent = holdWords(r);
  // What really blocks a new plan, as the round recorded it (dashboard/rounds.py waiting_reason).
  const waiting = r.explanation.waiting ? ` Waiting: ${r.explanation.waiting}.` : "";
  const words = document.createElement("strong");
  // A plan is said in one line, from its figures on this round's data ("now"); the round's
  // sentence (why it is kept, what it was weighed against) is one click away.
  words.textContent = planNow ? `Plan ${planNow.plan}: ${planNow.moves} move${planNow.moves === 1 ? "" : "s"} take the` +
    ` imbalance ${pct(planNow.imbalance)} → ${pct(planNow.imbalance_after)} now, a gain of ${pct(planNow.gain)}` :
    DECISION_WORDS[r.decision] || r.decision;
  const reason = document.createElement(planNow ? "details" : "span");
  reason.className = "reason";
  const period = r.explanation.usage_period;
  const figures = period == null ? "" : period > 0 ? ` Usage figures: mean of the last ${Math.round(period / 60)} min.` :
    " Usage figures: the latest values.";
  const text = ` ${r.explanation.reason}${waiting}${figures}`;
  if (planNow) {
    reason.innerHTML = "<summary>Why</summary><p></p>";
    reason.open = Boolean(el("decision").querySelector("details")?.open);  // a new round keeps it open
  }
  (planNow ? reason.lastChild : reason).textContent = text;
  el("decision").replaceChildren(words, reason);
  el("decision").dataset.decision = r.decision;
  stamp(el("last-round"), r.at);
  stamp(el("last-collected"), r.at);  // a round runs on the snapshot collected just before it
  showNodes(r.node_usage, planNow);  // nodebars.js
  showMovedLines();
  if (migrations.size) showPlanSummary();
}

// Each waiting card's line of the load it moves, from this round's figures (nodebars.js).
function showMovedLines() {
  el("recommendations").querySelectorAll("li[data-id]").forEach((li) => {
    const m = migrations.get(Number(li.dataset.id));
    const line = li.querySelector(".moved");
    if (m && line) {
      line.textContent = movedWords(m);
      line.hidden = !line.textContent;
    }
  });
}

function addRound(r) {
  const point = {at: r.at, imbalance: r.imbalance, threshold: r.threshold};
  ranges.forEach((data) => data.points.push(point));
  if (ranges.has(range)) trendAdd(point);
  showRound(r);
}

// The recommendations waiting for a decision, ranked by priority (1 = owed: evacuation, rule fix),
// then as the plan computed them: plan, then step.
function waiting(all) {
  return all.filter((m) => m.state === "suggested")
    .sort((a, b) => (a.priority - b.priority) || (a.plan - b.plan) || (a.step - b.step));
}

function showMigrations() {
  const all = [...migrations.values()].sort((a, b) => b.id - a.id);
  const pending = waiting(all);
  // Keep the items already shown: a push must not wipe a rejection reason being typed, nor
  // a lost race's explanation (kept until the next page load).
  const shown = new Map([...el("recommendations").children].map((li) => [li.dataset.id, li]));
  const lost = [...shown.values()].filter((li) => li.dataset.keep);
  const items = pending.map((m) => shown.get(String(m.id)) || recommendationItem(m));
  el("recommendations").replaceChildren(...lost.filter((li) => !items.includes(li)), ...items);
  el("recommendations").removeAttribute("aria-busy");
  el("no-recommendations").hidden = pending.length > 0;
  el("apply-all").hidden = pending.length === 0 || config.read_only || !config.can_decide;
  showPlanSummary();
  el("migrations").tBodies[0].replaceChildren(...all.filter((m) => m.state !== "suggested").slice(0, 20).map(migrationRow));
  // "Mark failed" shows once a running migration's follower is silent: the table is drawn again then.
  clearTimeout(silenceTimer);
  const next = all.map((m) => m.state === "running" && Date.parse(m.silent_from)).filter((at) => at > Date.now());
  if (next.length) silenceTimer = setTimeout(showMigrations, Math.min(...next) - Date.now() + 100);
}
let silenceTimer;

// The waiting plan in one line above its cards.
function showPlanSummary() {
  const all = [...migrations.values()];
  const pending = waiting(all);
  el("plan-summary").hidden = pending.length === 0;
  if (pending.length) {
    const first = pending[0];
    // One plan, one set of figures: the status says them "now" (the last round's plan_figures);
    // here only when they differ, labelled "when computed" (the snapshot the plan was made on).
    const steps = all.filter((m) => m.plan === first.plan).sort((a, b) => a.step - b.step);
    const start = steps[0];
    const fresh = planNow?.plan === first.plan && !planNow.kept;
    const computed = `computed ${clock(first.recommended_at)}`;
    const then = fresh ? "" : `; when computed: imbalance ${pct(start.imbalance_before)} →` +
      ` ${pct(steps[steps.length - 1].imbalance_after)}, total gain ${pct(first.plan_gain)}`;
    el("plan-summary").textContent = first.explanation
      ? `Plan ${first.plan} (${KIND_WORDS[first.kind] || first.kind}, priority 1, ${computed}): it goes before any balancing.` +
        ` ${pending.length} recommendations waiting.`
      : `Plan ${first.plan} (${computed}${then}; margin ${pct(first.margin)}): ${pending.length} of its ${steps.length}` +
        ` moves waiting. A move marked "computed after #N" assumes #N is done first.`;
  }
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
  // Its move drawn on the node bars (nodebars.js). Focus by listener: there is no onfocusin property.
  ["mouseenter", "focusin"].forEach((type) => li.addEventListener(type, () => pointAt(m, true)));
  ["mouseleave", "focusout"].forEach((type) => li.addEventListener(type, () => pointAt(m, false)));
  li.querySelector(".math").textContent =
    `#${m.id} priority ${m.priority} · ${m.guests.join(", ")}: ${m.source} → ${m.target}` +
    ` · imbalance ${pct(m.imbalance_before)} → ${pct(m.imbalance_after)} as computed ${clock(m.recommended_at)}` +
    ` · step gain ${pct(m.relative_gain)}` +
    (behind ? ` · computed after #${behind.id}` : "") + ` · ${m.method}` +
    (m.downtime != null ? ` · restart, ~${Math.round(m.downtime)} s downtime (a container cannot live-migrate)` : "");
  li.querySelector(".math").after(payoffLine(m));
  const moved = document.createElement("p");
  moved.className = "moved";
  moved.textContent = movedWords(m);
  moved.hidden = !moved.textContent;
  li.querySelector(".math").after(moved);
  if (m.explanation) {  // owed moves (evacuation, failback, rule fix) say why they go first
    const why = document.createElement("p");
    why.className = "why";
    why.textContent = `${KIND_WORDS[m.kind] || m.kind}: ${m.explanation}`;
    li.querySelector(".math").after(why);
  }
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

// Gain and cost side by side, from the figures the round stored (crs.payoff), never its sentence.
// None stored: an owed move (it says why instead), or the proxmox preset, whose moves need not pay.
function payoffLine(m) {
  const line = document.createElement("p");
  line.className = "payoff";
  const p = m.payoff;
  if (!p) {
    if (!m.explanation && document.getElementById("preset")?.dataset.preset === "proxmox") {
      line.textContent = "Cost not weighed: under the proxmox preset a move need not pay for itself, as in Proxmox.";
      line.classList.add("muted");
    } else line.hidden = true;
    return line;
  }
  const fig = (v) => String(Number(v.toPrecision(3)));
  const over = p.horizon_s >= 3600 ? `${fig(p.horizon_s / 3600)} h` : `${Math.max(1, Math.round(p.horizon_s / 60))} min`;
  const copy = `to copy ${fig(p.copy_bytes / 2 ** 30)} GiB at ${Math.round(p.migration_speed / 2 ** 20)} MiB/s and switch over`;
  const balancing = p.payoff_unit === "imbalance-seconds";  // fraction × seconds: %·h is ÷ 36
  const gain = balancing ? `gain ${fig(p.benefit / 36)} %·h of imbalance over ~${over}` :
    p.horizon_s > 0 ? `relieves ${fig(p.benefit)} guest-seconds of stall over ~${over}` : "relieves no lasting stall";
  const cost = balancing ? `cost ${fig(p.cost / 36)} %·h ${copy}` : `cost ${fig(p.cost)} guest-seconds ${copy}`;
  line.innerHTML = '<span class="gain"></span><span class="cost"></span>';
  line.firstChild.textContent = gain;
  line.lastChild.textContent = cost;
  return line;
}

// A done move's outcome: the imbalance the rounds measured after it, beside the prediction.
function observed(m) {
  if (m.state !== "done") return "";
  const figures = [[m.observed_5m, "5 min"], [m.observed_1h, "1 h"]].filter(([value]) => value !== null && value !== undefined);
  return figures.length ? "; observed " + figures.map(([value, after]) => `${pct(value)} after ${after}`).join(", ") : "; observed: not yet";
}

const MIGRATION_COLUMNS = [...document.querySelectorAll("#migrations thead th")].map((th) => th.textContent);

function migrationRow(m) {
  const row = document.createElement("tr");
  row.dataset.id = m.id;
  row.className = "state-" + m.state;
  const progress = m.state === "running" ? ` ${Math.round(percent(m.progress))} %` : "";
  // The plan and step, as the status box and the recommendations say them ("plan 4 step 1").
  const cells = [m.id, m.plan == null ? "" : `${m.plan} step ${m.step}`, m.guests.join(", "), `${m.source} → ${m.target}`,
                 `${pct(m.imbalance_before)} → ${pct(m.imbalance_after)}${observed(m)}`, m.state + progress,
                 m.automatic ? "automatic" : (m.decided_by || "")];
  cells.forEach((text, i) => {
    const td = document.createElement("td");
    td.textContent = text;
    td.dataset.label = MIGRATION_COLUMNS[i];  // a card per row on a phone (.stack)
    row.append(td);
  });
  const state = row.cells[5];
  state.className = "state";
  // A migration stuck after an outage: its follower silent (tasks.silent), an operator may settle it.
  if (m.state === "running" && config.can_decide && m.silent_from && Date.parse(m.silent_from) <= Date.now()) {
    state.insertAdjacentHTML("beforeend", ' <button class="mark-failed">Mark failed</button> <span class="error"></span>');
    row.querySelector(".mark-failed").onclick = () => {
      const what = `Mark migration #${m.id} (${m.guests.join(", ")}: ${m.source} → ${m.target}) failed?` +
        " Nothing has heard from it for a while; the task on the cluster is not stopped.";
      if (confirm(what)) decide(row, config.mark_failed, m.id, {});
    };
  }
  if (m.reason) {
    row.title = m.reason;
    const why = document.createElement("span");  // shown, not only in a tooltip
    why.className = "why";
    why.textContent = m.reason;
    state.append(why);
  }
  return row;
}

// Apply all, through the REST API (/api/v1/) with the page's session: what it approved comes back
// as pushes; what it could not approve is said beside the button.
async function applyAll() {
  el("apply-all").disabled = true;
  const response = await fetch(config.approve_all, {
    method: "POST", headers: {"X-CSRFToken": csrfToken()}, credentials: "same-origin"});
  const answer = await response.json();
  const refused = Object.entries(answer.refused || {}).map(([id, why]) => `#${id}: ${why}`);
  el("apply-all-error").textContent = response.ok ? refused.join("; ") : (answer.detail || "");
  el("apply-all").disabled = false;
}

// The record of the last days (GET outcomes), in words; fetched again whenever a move is done.
async function showOutcomes() {
  const response = await fetch(config.outcomes, {credentials: "same-origin"});
  if (!response.ok) return;
  const o = await response.json();
  const signed = (fraction) => (fraction < 0 ? "−" : "+") + pct(Math.abs(fraction));
  const observed = o.observed_change_1h != null ? `${signed(o.observed_change_1h)} (1 h after)` :
    o.observed_change_5m != null ? `${signed(o.observed_change_5m)} (5 min after)` : "not yet measured";
  el("outcomes-summary").textContent = o.moves
    ? `Last ${o.days} days: ${o.moves} move${o.moves === 1 ? "" : "s"}, predicted ${signed(o.predicted_change)},` +
      ` observed ${observed} in imbalance` +
      (o.judged ? `; ${o.paid} of ${o.judged} judged moves paid (${pct(o.paid_share)}).` : ".")
    : `No move done in the last ${o.days} days.`;
}

function setMigration(m) {
  if (m.state === "running" && migrations.get(m.id)?.state !== "running") markStarted(m);
  if (m.state === "done" && migrations.get(m.id)?.state !== "done") showOutcomes();
  migrations.set(m.id, m);
  showMigrations();
}

function showError(li, text) {
  const box = li.querySelector(".error");
  box.textContent = text;
  box.hidden = !text;
  li.querySelector(".reason")?.setAttribute("aria-invalid", text ? "true" : "false");
}

// An API refusal as a sentence: {"detail": "..."} or {field: ["message", ...]} (/api/v1/'s shapes).
function refusal(answer, status) {
  if (answer.detail) return answer.detail;
  const messages = Object.values(answer).flat().filter((m) => typeof m === "string");
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
    showError(li, `Too late: ${answer.detail}.`);
    li.dataset.keep = "true";
    return;
  }
  // The API's migration (200, or beside a refusal) over the pushed one: its state and who decided.
  const decided = response.ok ? answer : answer.migration;
  if (decided?.id) setMigration({...migrations.get(decided.id), ...decided});
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
  showStop(state.stop);  // set or lifted elsewhere while this page was away
  if (state.rounds.length) showRound(state.rounds[state.rounds.length - 1]);
  ranges.clear();  // what was missed while the socket was away: fetched again
  showRange(range);
  migrations.clear();
  state.migrations.forEach((m) => migrations.set(m.id, m));
  showMigrations();
  showOutcomes();
  if (state.n1) document.dispatchEvent(new CustomEvent("crs:n1", {detail: state.n1}));  // n1.js draws it
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
    // The last round only: the trend comes from the history API by range (showRange), once.
    const seen = stopNews;
    const response = await fetch(`${config.api}?rounds=1`, {credentials: "same-origin"});
    if (!response.ok) return;  // signed out meanwhile: the socket's close says so
    const state = await response.json();
    if (stopNews !== seen) state.stop = stop;  // a stop set or lifted while it was read is newer than it
    load(state);
    delay = 1000;
    el("live-paused").hidden = true;
    setLive("open", "open");
  };
  socket.onmessage = (event) => {
    const data = JSON.parse(event.data);
    document.dispatchEvent(new CustomEvent("crs:event", {detail: data}));  // other panels (maintenance.js) follow
    if (data.type === "round") addRound(data);
    else if (data.type === "migration") setMigration(data);
    else if (data.type === "source") showSource(data);
    else if (data.type === "stop") stopChanged(data);
    else document.dispatchEvent(new CustomEvent(`crs:${data.type}`, {detail: data}));  // other panels' (n1.js)
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
  // Every cluster at once is asked first: it sits one click from this cluster's stop. The two
  // stops are kept apart: lifting all leaves this cluster's own.
  const stopped = all ? config.all_stopped : stop.here;
  if (all && !stopped && !confirm("Stop every cluster? Automation pauses and running moves are aborted on all of them.")) return;
  const response = await fetch(all ? config.emergency_stop_all : config.emergency_stop, {
    method: "POST", headers: {"X-CSRFToken": csrfToken(), "Content-Type": "application/json"},
    credentials: "same-origin", body: JSON.stringify({stop: !stopped})}).catch(() => null);
  if (!response?.ok) {  // said where the stop is said: a click that changed nothing must not look like one
    const why = response ? refusal(await response.json().catch(() => ({})), response.status) : "the server cannot be reached";
    el("stop-state").textContent = `The emergency stop was not ${stopped ? "lifted" : "set"}: ${why}. Nothing changed; try again.`;
    el("stop-state").hidden = false;
    return;
  }
  const answers = (await response.json()).clusters;
  stopChanged(answers.find((c) => c.id === config.cluster).stop);
}

function stopChanged(state) {
  // A stop set or lifted, by this page or pushed from another: news the page counts, so a state
  // fetched meanwhile (the socket's reopening) cannot put the stop as it was back on show.
  stopNews += 1;
  config.all_stopped = state.all;
  showStop(state);
}

// While a stop holds, the status box says so first, with which stop, who set it and when; the
// decision and hold lines (a round's words, green when balanced) are hidden until it is lifted.
function showStop(state) {
  stop = state;
  const held = stop.here || stop.all;
  const which = stop.here && stop.all ? "this cluster's own and Stop all's" : stop.here ? "this cluster's own" :
    "set by Stop all, on every cluster";
  el("stop-state").textContent = held ?
    `Emergency stop (${which}): automation paused, nothing starts. Set by ${stop.by || "the system"} at ${clock(stop.at)}.` : "";
  el("stop-state").hidden = !held;
  el("decision").hidden = held;
  el("hold").hidden = held;
  if (!el("emergency-stop")) return;
  el("emergency-stop").textContent = stop.here ? "Lift the emergency stop" : "Emergency stop";
  el("emergency-stop-all").textContent = config.all_stopped ? "Lift the stop on all clusters" : "Stop all clusters";
}

el("apply-all").onclick = applyAll;
document.querySelectorAll("#ranges button").forEach((b) => { b.onclick = () => showRange(b.dataset.range); });
showStop(JSON.parse(el("stop-data").textContent));
if (el("emergency-stop")) {
  el("emergency-stop").onclick = () => toggleStop(false);
  el("emergency-stop-all").onclick = () => toggleStop(true);
}
trendStart(el("chart"), config.plotly);  // trend.js: an SVG now, Plotly when the admin reaches for the chart
connect(1000);

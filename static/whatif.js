// The what-if page: starts a replay through the API, then follows its progress until it is done.
// Percent on the page, fractions in the API (units.js converts).
"use strict";

const whatifConfig = JSON.parse(document.getElementById("whatif-config").textContent);
const byId = (id) => document.getElementById(id);

const moves = (count) => `${count} move${count === 1 ? "" : "s"}`;

function sentence(w) {
  const r = w.result;
  const changed = Object.entries(w.changes).map(([name, value]) =>
    name === "threshold" || name === "margin" ? `${name} ${pct(value)}` : `${name.replace("_", " ")} ${value}`);
  const recorded = r.recorded.p90_imbalance === null ? "" :
    ` What really happened: ${moves(r.recorded.moves)}, p90 imbalance ${pct(r.recorded.p90_imbalance)}.`;
  const span = r.hours >= 1 ? `${r.hours.toFixed(1)} h` : `${Math.max(1, Math.round(r.hours * 60))} min`;
  return `With ${changed.join(", ") || "the current settings"}, the last ${span} (${r.rounds} rounds) ` +
    `would have had ${moves(r.proposed.moves)} and p90 imbalance ${pct(r.proposed.p90_imbalance)}, ` +
    `against ${r.current.moves} and ${pct(r.current.p90_imbalance)} with the current settings.${recorded}`;
}

function show(w) {
  byId("whatif-status").hidden = false;
  byId("whatif-progress").value = w.progress;
  const words = {queued: "waiting for a worker", running: `replaying: ${pct(w.progress, 0)}`,
                 done: "done", failed: `failed: ${w.error}`};
  byId("whatif-state").textContent = words[w.state] || w.state;
  byId("whatif-status").dataset.state = w.state;
  byId("whatif-result").textContent = w.state === "done" ? sentence(w) : "";
}

async function follow(id) {
  const response = await fetch(whatifConfig.status.replace("/0/", `/${id}/`), {credentials: "same-origin"});
  if (!response.ok) return;
  const w = await response.json();
  show(w);
  if (w.state === "queued" || w.state === "running") setTimeout(() => follow(id), 1000);
}

async function start(event) {
  event.preventDefault();
  const form = event.target;
  const fraction = (name) => fromPercent(Number(form.elements[name].value));
  const body = {threshold: fraction("threshold"), margin: fraction("margin"),
                hold_duration: Number(form.elements.hold_duration.value), method: form.elements.method.value,
                period: form.elements.period.value};
  byId("whatif-run").disabled = true;
  const response = await fetch(whatifConfig.start, {
    method: "POST", credentials: "same-origin", body: JSON.stringify(body),
    headers: {"Content-Type": "application/json",
              "X-CSRFToken": document.querySelector("input[name=csrfmiddlewaretoken]").value}});
  const answer = await response.json();
  byId("whatif-run").disabled = false;
  const error = byId("whatif-error");
  error.hidden = response.ok;
  if (!response.ok) {
    error.textContent = Object.values(answer).flat().join("; ") || `refused (HTTP ${response.status})`;
    return;
  }
  show(answer);
  follow(answer.id);
}

if (byId("whatif-form")) byId("whatif-form").onsubmit = start;
if (whatifConfig.latest) follow(whatifConfig.latest);

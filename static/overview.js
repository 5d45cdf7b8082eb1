// The overview: every cluster on one line. Sort by a column (its heading, again to reverse; the
// "sort by" menu on a phone), filter by name and by what needs attention, all in the browser.
// Live: one event per batch of rounds carries every row (dashboard/overview.py's shape).
"use strict";

const table = document.getElementById("overview");
const body = table.tBodies[0];
const sorting = {col: 0, descending: false};
const byId = (id) => document.getElementById(id);
// A figure in percent through units.js's one conversion; "–" for a cluster with no round yet.
const shownPct = (fraction) => fraction === null ? "–" : pct(fraction);
// What each "show" choice keeps (a row's data- attributes, set by the server and by `fill`).
const SHOWN = {
  all: () => true,
  above: (d) => d.above === "1",
  waiting: (d) => d.waiting !== "0",
  running: (d) => d.running !== "0",
  n1: (d) => d.n1 === "fails",
  source: (d) => d.source === "error",
  late: (d) => d.late === "1",
};

function key(row, col) {
  const cell = row.cells[col];
  const value = cell.dataset.sort ?? cell.textContent.trim();
  const number = Number(value);
  return value !== "" && !Number.isNaN(number) ? number : value.toLowerCase();
}

function sort() {
  const sign = sorting.descending ? -1 : 1;
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = key(a, sorting.col), y = key(b, sorting.col);
    if (typeof x === "number" && typeof y === "number") return sign * (x - y);
    return sign * String(x).localeCompare(String(y), undefined, {numeric: true});
  });
  body.append(...rows);
  table.querySelectorAll("th").forEach((th) => th.removeAttribute("aria-sort"));
  const heading = table.querySelector(`button.sort[data-col="${sorting.col}"]`);
  heading.closest("th").setAttribute("aria-sort", sorting.descending ? "descending" : "ascending");
  byId("overview-sort").value = String(sorting.col);
}

function filter() {
  const words = byId("overview-filter").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  const keep = SHOWN[byId("overview-show").value] || SHOWN.all;
  let shown = 0;
  Array.from(body.rows).forEach((row) => {
    const name = row.cells[0].textContent.toLowerCase();
    row.hidden = !(keep(row.dataset) && words.every((w) => name.includes(w)));
    if (!row.hidden) shown += 1;
  });
  byId("shown-count").textContent = shown;
  byId("row-count").textContent = body.rows.length;
}

// A cluster's row from a pushed (or fetched) row: the same cells the server rendered.
function fill(tr, r) {
  Object.assign(tr.dataset, {
    above: r.above ? "1" : "0", waiting: String(r.waiting), running: String(r.running), n1: r.n1 || "",
    source: r.source_error ? "error" : "ok", interval: String(r.round_interval),
  });
  const [name, imbalance, spark, waiting, running, n1, source, last, automation] = tr.cells;
  name.querySelector("a").textContent = r.name;
  name.querySelector("a").href = r.url;
  imbalance.dataset.sort = r.imbalance === null ? "-1" : String(r.imbalance);
  imbalance.querySelector(".value").textContent = shownPct(r.imbalance);
  imbalance.querySelector(".threshold").textContent = shownPct(r.threshold);
  spark.dataset.sort = r.sparkline.high === null ? "-1" : String(r.sparkline.high);
  spark.querySelector("polyline").setAttribute("points", r.sparkline.points);
  for (const y of ["y1", "y2"]) spark.querySelector("line").setAttribute(y, r.sparkline.threshold_y);
  spark.querySelector(".collecting").textContent = r.sparkline.collecting;  // too few points for a line yet
  waiting.textContent = waiting.dataset.sort = r.waiting;
  running.textContent = running.dataset.sort = r.running;
  n1.textContent = r.n1 === "fails" ? "fails" : r.n1 ? "survives" : "not yet";
  n1.title = r.n1_verdict;
  source.textContent = r.source_error ? "unreachable" : "ok";
  source.title = r.source_error;
  last.dataset.sort = r.last_round_at || "";
  last.replaceChildren(r.last_round_at ? document.createElement("time") : "none yet");
  if (r.last_round_at) stamp(last.firstChild, r.last_round_at);  // times.js
  automation.textContent = r.automation;
}

function apply(rows) {
  const ids = new Set(rows.map((r) => `cluster-${r.id}`));
  Array.from(body.rows).forEach((tr) => { if (!ids.has(tr.id)) tr.remove(); });  // archived since
  const template = body.rows[0];
  rows.forEach((r) => {
    let tr = byId(`cluster-${r.id}`);
    if (!tr && template) {  // a cluster added since the page loaded
      tr = template.cloneNode(true);
      tr.id = `cluster-${r.id}`;
      body.append(tr);
    }
    if (tr) fill(tr, r);
  });
  markLate();
  sort();
  filter();
}

// A row is late when its last round is older than two of its intervals; the clock ticks on.
function markLate() {
  const now = Date.now();
  Array.from(body.rows).forEach((tr) => {
    const at = tr.cells[7].dataset.sort;
    tr.dataset.late = !at || now - new Date(at) > 2000 * Number(tr.dataset.interval) ? "1" : "0";
  });
}

function setLive(state, text) {
  byId("ws-state").dataset.state = state;
  byId("ws-state").textContent = text;
}

function connect(delay, missed) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/overview/`);
  setLive("connecting", "connecting");
  socket.onopen = async () => {
    if (missed) {  // what was pushed while the socket was away: fetched once it listens again
      const response = await fetch(config.api, {credentials: "same-origin"});
      if (!response.ok) return;
      apply((await response.json()).rows);
    }
    delay = 1000;
    byId("live-paused").hidden = true;
    setLive("open", "open");
  };
  socket.onmessage = (event) => {
    const data = JSON.parse(event.data);
    if (data.type === "overview") apply(data.rows);
  };
  socket.onclose = (event) => {
    if (event.code === 4401) return setLive("signed-out", "signed out");
    if (event.code === 4403) return setLive("not-allowed", "not allowed");
    const wait = delay * (0.5 + Math.random());
    setLive("paused", `paused, retrying in ${Math.round(wait / 1000)} s`);
    byId("live-paused").hidden = false;
    setTimeout(() => connect(Math.min(delay * 2, 30000), true), wait);
  };
}

const config = JSON.parse(byId("overview-config").textContent);
table.querySelectorAll("button.sort").forEach((button) => {
  button.onclick = () => {
    const col = Number(button.dataset.col);
    sorting.descending = sorting.col === col ? !sorting.descending : false;
    sorting.col = col;
    sort();
  };
});
byId("overview-sort").onchange = (event) => {
  sorting.col = Number(event.target.value);
  sorting.descending = false;
  sort();
};
byId("overview-filter").oninput = filter;
byId("overview-show").onchange = filter;
setInterval(() => { markLate(); if (byId("overview-show").value === "late") filter(); }, 5000);
connect(1000, false);

// The cluster page's node-load bars: each node's CPU and memory load now, where the waiting plan
// takes it (a dark mark and the figure after the arrow), and while a recommendation is pointed at
// or focused, the load that move takes off its source and puts on its target. All from the
// round's figures (node_usage, plan_figures with its moved_load), never from a sentence.
// dashboard.js calls showNodes on every round and pointAt from the cards.
"use strict";

const RESOURCES = [["cpu", "CPU"], ["memory", "memory"]];
let nodesShown = {usage: {}, plan: null};  // the last round's, for a pointed card's move
let pointed = null;  // the recommendation pointed at or focused: drawn again after each round

function showNodes(usage, plan) {
  nodesShown = {usage, plan};
  const byName = ([a], [b]) => a.localeCompare(b, undefined, {numeric: true});  // node2 before node10
  document.getElementById("nodes").tBodies[0].replaceChildren(...Object.entries(usage).sort(byName).map(([name, u]) => {
    const row = document.createElement("tr");
    const after = plan?.node_usage_after?.[name];
    row.innerHTML = `<td></td>` + RESOURCES.map(([key]) => `<td>${bar(u[key], u.forecast?.[key], after?.[key], plan)}</td>`).join("");
    row.firstChild.textContent = name;
    row.dataset.node = name;
    return row;
  }));
  const legend = document.getElementById("plan-legend");
  legend.hidden = !plan;
  legend.textContent = plan ? `The dark mark and the figure after the arrow: the node's load once plan` +
    ` ${plan.plan}'s ${plan.moves} move${plan.moves === 1 ? " is" : "s are"} done. Point at or focus a` +
    ` recommendation: the load it moves, striped, on its source and its target.` : "";
  showPointed();
}

const barWidth = (f) => Math.min(100, Math.max(0, percent(f))).toFixed(1);
const barMark = (cls, words, at) =>
  `<i class="${cls}" role="img" aria-label="${words}" title="${words}" style="left:${barWidth(at)}%"></i>`;

// `peak`: the node's forecast peak within the next hour (dashboard/rounds.py node_usage), a
// marker on the bar; absent when the forecast is off or no guest of the node has a day of history.
// `after`: its load once `plan`'s moves are done (the round's plan_figures), a mark and a figure.
function bar(fraction, peak, after, plan) {
  const moved = after != null && Math.abs(after - fraction) >= 0.0005;
  // With a plan shown every bar puts its figures under a full-width track, so all tracks compare.
  return `<div class="bar${after != null ? " planned" : ""}"><div class="track"><div style="width:${barWidth(fraction)}%"></div>` +
    (peak == null ? "" : barMark("forecast", `forecast peak next hour: ${pct(peak, 0)}`, peak)) +
    (moved ? barMark("after", `after plan ${plan.plan}: ${pct(after)}`, after) : "") +
    `</div><span>${pct(fraction)}${moved ? ` → ${pct(after)}` : ""}</span></div>`;
}

// The load recommendation `m` moves on this round's figures; undefined when they are not its
// plan's (a plan partly approved, an owed move of another plan).
function movedLoad(m) {
  return nodesShown.plan?.moved_load?.find((x) => x.leader === m.leader && x.source === m.source && x.target === m.target);
}

// A share that moves, signed: "−12.3 %", "+0.6 %"; a trace says so rather than "−0.0 %".
const shareMoved = (sign, share) => share < 0.0005 ? "under 0.1 %" : `${sign}${pct(share)}`;

// The card's own line: the same figures its bars draw, in words.
function movedWords(m) {
  const load = movedLoad(m);
  const side = (node, sign, share) => `${node} ` + RESOURCES.map(([key, word]) => `${shareMoved(sign, share[key])} ${word}`).join(", ");
  return load ? `moves now: ${side(m.source, "−", load.leaves)} → ${side(m.target, "+", load.arrives)}` : "";
}

function pointAt(m, on) {
  if (on) pointed = m;
  else if (pointed?.id === m.id) pointed = null;
  showPointed();
}

// The pointed move on the bars: its source and target named, and on each of their bars the load
// that leaves (the end of the source's bar) or arrives (past the end of the target's), striped,
// with its figure under the bar and in the stripe's label for a screen reader.
function showPointed() {
  // A card decided or expired while pointed at is gone without a mouseleave: its move goes too.
  if (pointed && !document.querySelector(`#recommendations li[data-id="${pointed.id}"]:not(.lost)`)) pointed = null;
  const m = pointed;
  const load = m && movedLoad(m);
  document.querySelectorAll("#nodes tr[data-node]").forEach((row) => {
    const from = m?.source === row.dataset.node, to = m?.target === row.dataset.node;
    row.classList.toggle("move-source", from);
    row.classList.toggle("move-target", to);
    row.querySelectorAll(".moving").forEach((e) => e.remove());
    if (!load || !(from || to)) return;
    RESOURCES.forEach(([key, word], i) => {
      const now = nodesShown.usage[row.dataset.node][key];
      const share = (from ? load.leaves : load.arrives)[key];
      const figure = shareMoved(from ? "−" : "+", share);
      const words = `${m.guests.join(", ")} ${from ? "leaves" : "arrives on"} ${row.dataset.node}: ${figure} ${word}`;
      const stripe = document.createElement("i");
      stripe.className = `moving ${from ? "leaves" : "arrives"}`;
      stripe.setAttribute("role", "img");
      stripe.setAttribute("aria-label", words);
      stripe.title = words;
      stripe.style.left = `${barWidth(from ? now - share : now)}%`;
      stripe.style.width = `${barWidth(Math.min(share, from ? now : 1 - now))}%`;
      const track = row.cells[i + 1].querySelector(".track");
      track.append(stripe);
      const text = document.createElement("b");
      text.className = `moving ${from ? "leaves" : "arrives"}`;
      text.textContent = `${figure} ${from ? "leaves" : "arrives"}`;
      track.parentElement.append(text);
    });
  });
}

// The N+1 panel of the live page: the verdict and, per node, where its HA guests would go if it
// failed now. Drawn from the embedded verdict, then from each pushed one (dashboard.js passes
// events it does not draw itself on as "crs:<type>").
"use strict";

function n1Text(tag, text, className) {
  const element = document.createElement(tag);
  element.textContent = text;
  if (className) element.className = className;
  return element;
}

function n1Loss(loss) {
  const item = document.createElement("li");
  item.dataset.node = loss.node;
  item.dataset.survived = loss.survived;
  const details = document.createElement("details");
  const placed = loss.recoveries.filter((r) => r.target);
  const summary = loss.survived
    ? `losing ${loss.node}: survived (${placed.length} HA guest${placed.length === 1 ? "" : "s"} recovered)`
    : loss.summary;
  details.append(n1Text("summary", summary, loss.survived ? "" : "error"));
  const byTarget = new Map();
  placed.forEach((r) => byTarget.set(r.target, [...(byTarget.get(r.target) || []), r.sid]));
  const list = document.createElement("ul");
  [...byTarget.entries()].sort().forEach(([target, sids]) => {
    const load = loss.loads.find((l) => l.node === target);
    const after = load ? ` (then ${Math.round(load.cpu * 100)} % of its CPU limit, ${Math.round(load.memory * 100)} % of its memory)` : "";
    list.append(n1Text("li", `to ${target}: ${sids.join(", ")}${after}`));
  });
  const lost = loss.recoveries.filter((r) => !r.target);
  if (lost.length) list.append(n1Text("li", `no node: ${lost.map((r) => `${r.sid} (${r.why_lost})`).join(", ")}`, "error"));
  if (loss.down.length) list.append(n1Text("li", `down with it (not HA): ${loss.down.join(", ")}`, "muted"));
  if (!list.children.length) list.append(n1Text("li", "no HA guest runs there", "muted"));
  details.append(list);
  item.append(details);
  return item;
}

function showN1(data) {
  if (!data) return;
  const verdict = document.getElementById("n1-verdict");
  verdict.textContent = data.survives ? `Survives the loss of any one node.` : `${data.verdict[0].toUpperCase()}${data.verdict.slice(1)}.`;
  verdict.dataset.survives = data.survives;
  const at = document.getElementById("n1-at");
  at.hidden = false;
  stamp(at.querySelector("time"), data.computed_at);
  document.getElementById("n1-losses").replaceChildren(...data.losses.map(n1Loss));
}

const n1Embedded = document.getElementById("n1-data");
if (n1Embedded) showN1(JSON.parse(n1Embedded.textContent));
document.addEventListener("crs:n1", (event) => showN1(event.detail));

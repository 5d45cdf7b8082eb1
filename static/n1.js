// The N+1 panel of the live page: the verdict and, per node, where its HA guests would go if it
// failed now. Drawn from the embedded verdict, then from each pushed one (dashboard.js passes
// events it does not draw itself on as "crs:<type>"). The verdict keeps only what goes wrong per
// node; where each guest would go is asked of the API (n1-loss) when the admin opens that node.
"use strict";

function n1Text(tag, text, className) {
  const element = document.createElement(tag);
  element.textContent = text;
  if (className) element.className = className;
  return element;
}

function n1Guests(sids, count) {
  return sids.join(", ") + (count > sids.length ? ` and ${count - sids.length} more` : "");
}

function n1Loss(loss) {
  const item = document.createElement("li");
  item.dataset.node = loss.node;
  item.dataset.survived = loss.survived;
  const details = document.createElement("details");
  const summary = loss.survived
    ? `losing ${loss.node}: survived (${loss.recovered} HA guest${loss.recovered === 1 ? "" : "s"} recovered)`
    : loss.summary;
  details.append(n1Text("summary", summary, loss.survived ? "" : "error"));
  const list = document.createElement("ul");
  if (loss.lost_count) list.append(n1Text("li", `no node: ${n1Guests(loss.lost, loss.lost_count)}`, "error"));
  if (loss.down_count) list.append(n1Text("li", `down with it (not HA): ${n1Guests(loss.down, loss.down_count)}`, "muted"));
  if (!loss.recovered && !list.children.length) list.append(n1Text("li", "no HA guest runs there", "muted"));
  details.append(list);
  if (loss.recovered) details.addEventListener("toggle", () => n1Targets(details, list, loss.node), {once: true});
  item.append(details);
  return item;
}

async function n1Targets(details, list, node) {
  // Where each HA guest would go, computed now from the latest snapshot.
  const url = `${document.getElementById("n1-losses").dataset.detail}?node=${encodeURIComponent(node)}`;
  const waiting = n1Text("li", "placing its HA guests…", "muted");
  list.prepend(waiting);
  const response = await fetch(url, {credentials: "same-origin"});
  if (!response.ok) {
    waiting.textContent = `could not place its HA guests now (${response.status})`;
    return;
  }
  const loss = await response.json();
  const byTarget = new Map();
  loss.recoveries.filter((r) => r.target).forEach((r) => byTarget.set(r.target, [...(byTarget.get(r.target) || []), r.sid]));
  const rows = [...byTarget.entries()].sort().map(([target, sids]) => {
    const load = loss.loads.find((l) => l.node === target);
    const after = load ? ` (then ${pct(load.cpu, 0)} of its CPU limit, ${pct(load.memory, 0)} of its memory)` : "";
    return n1Text("li", `to ${target}: ${sids.join(", ")}${after}`);
  });
  const lost = loss.recoveries.filter((r) => !r.target);
  if (lost.length) rows.push(n1Text("li", `no node: ${lost.map((r) => `${r.sid} (${r.why_lost})`).join(", ")}`, "error"));
  if (loss.down.length) rows.push(n1Text("li", `down with it (not HA): ${loss.down.join(", ")}`, "muted"));
  list.replaceChildren(...rows);
  details.dataset.placed = "true";
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

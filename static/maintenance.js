// The maintenance panel: each node's state and how far its draining got, from
// /api/v1/clusters/<id>/maintenance/, read again whenever the live socket brings a round or
// a migration (dashboard.js dispatches them as "crs:event"). Times via times.js (stamp).
"use strict";

(() => {
  const panel = document.getElementById("maintenance");
  if (!panel) return;
  const api = panel.dataset.api;
  const proxmox = panel.dataset.proxmox === "true";
  const canChange = panel.dataset.canChange === "true";
  const error = document.getElementById("maintenance-error");
  let reading = null;

  function plural(count, word) {
    return `${count} ${word}${count === 1 ? "" : "s"}`;
  }

  function stateCell(n) {
    const cell = document.createElement("td");
    if (!n.maintenance) {
      cell.textContent = "in use";
      return cell;
    }
    const words = document.createElement("span");
    words.className = n.guests_left ? "draining" : "drained";
    words.textContent = n.guests_left ? "in maintenance, draining" : "in maintenance, empty";
    cell.append(words);
    // Empty: since when it emptied; draining: since maintenance began.
    const at = n.guests_left ? n.since : n.emptied_at || n.since;
    if (at) {
      const since = document.createElement("time");
      cell.append(" since ", since);
      stamp(since, at);
    }
    return cell;
  }

  function guestsCell(n) {
    const cell = document.createElement("td");
    cell.className = "guests-left";
    // Stopped guests count and are said ("2 guests (2 stopped)"); draining counts the started
    // guests left, the stopped beside them; "moving" only while a move runs.
    let text = n.maintenance ? `${plural(n.guests_left, "guest")} left` : plural(n.guests_left + n.stopped, "guest");
    if (n.stopped) text += n.maintenance ? ` · ${n.stopped} stopped` : ` (${n.stopped} stopped)`;
    if (n.moving) text += ` · ${n.moving} moving`;
    if (n.maintenance && n.evacuating) text += ` · ${plural(n.evacuating, "move")} under way or waiting`;
    if (n.maintenance && n.left_to_proxmox) text += ` · ${n.left_to_proxmox} left to Proxmox's HA manager`;
    cell.textContent = text;
    return cell;
  }

  function actionCell(n) {
    const cell = document.createElement("td");
    if (proxmox) {
      const code = document.createElement("code");
      code.textContent = n.command;
      code.title = "run on any node of the cluster";
      cell.append(code);
      return cell;
    }
    if (!canChange) return cell;
    const button = document.createElement("button");
    button.type = "button";
    button.className = n.maintenance ? "leave-maintenance" : "enter-maintenance";
    button.textContent = n.maintenance ? "Leave maintenance" : "Enter maintenance";
    button.onclick = () => change(n.maintenance ? "leave" : "enter", n.node, button);
    cell.append(button);
    return cell;
  }

  function show(nodes) {
    const rows = nodes.map((n) => {
      const row = document.createElement("tr");
      row.dataset.node = n.node;
      row.dataset.maintenance = n.maintenance;
      const name = document.createElement("th");
      name.scope = "row";
      name.textContent = n.node;
      row.append(name, stateCell(n), guestsCell(n), actionCell(n));
      return row;
    });
    panel.querySelector("tbody").replaceChildren(...rows);
  }

  async function read() {
    reading ??= fetch(api, {headers: {Accept: "application/json"}}).then(async (response) => {
      if (response.ok) show(await response.json());
    }).finally(() => { reading = null; });
    return reading;
  }

  // A Proxmox cluster: the moves its own HA manager makes, one row each (guest, from, to, why).
  const theirs = document.getElementById("proxmox-moves");

  function showTheirs(moves) {
    const rows = moves.map((m) => {
      const row = document.createElement("tr");
      row.dataset.guest = m.guest;
      row.dataset.kind = m.kind;
      const cells = [["guest", m.guest], ["from", m.source], ["to", m.target], ["why", m.why]];
      for (const [label, text] of cells) {
        const cell = document.createElement("td");
        cell.dataset.label = label;
        cell.textContent = text;
        row.append(cell);
      }
      return row;
    });
    if (!rows.length) {
      const row = document.createElement("tr");
      const cell = document.createElement("td");
      cell.colSpan = 4;
      cell.className = "muted";
      cell.textContent = "None: every HA guest is where Proxmox keeps it.";
      row.append(cell);
      rows.push(row);
    }
    theirs.querySelector("tbody").replaceChildren(...rows);
  }

  async function readTheirs() {
    const response = await fetch(theirs.dataset.api, {headers: {Accept: "application/json"}});
    if (response.ok) showTheirs((await response.json()).moves);
  }

  async function change(action, node, button) {
    button.disabled = true;
    error.hidden = true;
    const atOnce = document.getElementById("maintenance-at-once");
    const response = await fetch(`${api}${action}/`, {
      method: "POST",
      headers: {"Content-Type": "application/json", "X-CSRFToken": csrfToken(), Accept: "application/json"},
      body: JSON.stringify({node: node, at_once: Boolean(atOnce && atOnce.checked)}),
    });
    const body = await response.json().catch(() => ({}));
    if (response.ok) {
      show(body);
    } else {
      error.textContent = body.detail || Object.values(body).flat().join(" ") || `refused (${response.status})`;
      error.hidden = false;
      button.disabled = false;
    }
  }

  document.addEventListener("crs:event", (event) => {
    if (event.detail.type === "round" || event.detail.type === "migration") {
      read();
      if (theirs) readTheirs();
    }
  });
  read();
  if (theirs) readTheirs();
})();

// The clusters page: Test connection shows crs check proxmox's verdicts before saving, a
// self-signed certificate is trusted by pinning the fingerprint shown, and the form saves
// through the API (dashboard/api/clusters.py), which checks every field.
"use strict";

const config = JSON.parse(document.getElementById("page-config").textContent);
const el = (id) => document.getElementById(id);
const form = el("cluster-form");

function csrfToken() {
  return document.querySelector("input[name=csrfmiddlewaretoken]").value;
}

function showTlsFields() {
  el("ca-bundle-field").hidden = el("tls").value !== "ca-bundle";
  el("fingerprint-field").hidden = el("tls").value !== "fingerprint";
}

function connection() {
  const fields = {
    host: el("host").value.trim(), port: Number(el("port").value || 8006), token_id: el("token-id").value.trim(),
    tls: el("tls").value, ca_bundle: el("ca-bundle").value.trim(), fingerprint: el("fingerprint").value.trim(),
  };
  if (el("token-secret").value) fields.token_secret = el("token-secret").value;
  return fields;
}

async function send(url, method, body) {
  const response = await fetch(url, {
    method, credentials: "same-origin", body: JSON.stringify(body),
    headers: {"X-CSRFToken": csrfToken(), "Content-Type": "application/json", Accept: "application/json"},
  });
  return {status: response.status, data: await response.json().catch(() => ({}))};
}

function showErrors(lines) {
  el("form-errors").hidden = lines.length === 0;
  el("form-errors").textContent = lines.join("; ");
}

// A 400's messages go beside the fields they name, in the field's own words (the label says
// which field: "token_id must be …" reads "must be …" under "Token ID"); the rest above the buttons.
function showFieldErrors(data) {
  form.querySelectorAll(".field.invalid").forEach((field) => field.classList.remove("invalid"));
  form.querySelectorAll(".field-error").forEach((message) => message.remove());
  form.querySelectorAll("[aria-invalid]").forEach((input) => input.removeAttribute("aria-invalid"));
  const rest = [];
  // {"name": [...], "proxmox": {"token_id": [...]}}; `proxmox` may also be one message of its own.
  const nested = data.proxmox && typeof data.proxmox === "object" && !Array.isArray(data.proxmox);
  for (const [name, messages] of Object.entries(nested ? {...data, ...data.proxmox} : data)) {
    if (nested && name === "proxmox") continue;
    const input = form.querySelector(`[name="${name}"]`);
    const texts = [].concat(messages).map(String);
    if (!input) {
      rest.push(...texts.map((m) => `${name}: ${m}`));
      continue;
    }
    const message = document.createElement("span");
    message.className = "error field-error";
    message.id = `${input.id}-error`;
    message.textContent = texts.map((m) => m.replace(new RegExp(`^${name} `), "")).join("; ");
    input.closest(".field").classList.add("invalid");
    input.closest(".field").append(message);
    input.setAttribute("aria-invalid", "true");
    input.setAttribute("aria-describedby", message.id);
  }
  showErrors(rest);
}

function showReport(report) {
  const list = document.createElement("ul");
  list.className = "verdicts";
  for (const finding of report.findings) {
    const item = document.createElement("li");
    item.dataset.topic = finding.topic;
    item.className = finding.ok ? "ok" : "fail";
    const verdict = document.createElement("strong");
    verdict.textContent = `${finding.ok ? "ok" : "FAIL"} ${finding.topic}: `;
    item.append(verdict, finding.text);
    list.append(item);
  }
  const summary = document.createElement("p");
  summary.id = "verdict";
  summary.className = report.ok ? "message success" : "message error";
  summary.textContent = report.ok ? "All well: the connection is ready." : "Not ready: see FAIL below.";
  el("verdicts").replaceChildren(summary, list);
  const tls = report.findings.find((f) => f.topic === "tls" && !f.ok);
  const presented = tls && tls.details.presented;
  el("trust").hidden = !presented;
  if (presented) {
    el("trust").textContent = `Trust this certificate (SHA-256 ${presented})`;
    el("trust").dataset.fingerprint = presented;
  }
}

async function testConnection() {
  showFieldErrors({});
  el("verdicts").textContent = "Testing…";
  const {status, data} = await send(config.test, "POST", connection());
  if (status !== 200) {
    el("verdicts").textContent = "";
    if (status === 400) showFieldErrors(data);
    else showErrors([data.detail || `answered ${status}`]);
    return;
  }
  showReport(data);
}

el("trust").addEventListener("click", () => {
  el("tls").value = "fingerprint";
  el("fingerprint").value = el("trust").dataset.fingerprint;
  showTlsFields();
  testConnection();
});
el("test-connection").addEventListener("click", testConnection);
el("tls").addEventListener("change", showTlsFields);
form.addEventListener("submit", async (event) => {
  event.preventDefault();
  showFieldErrors({});
  const body = {name: el("name").value.trim(), proxmox: connection()};
  if (config.method === "POST") body.source_kind = "proxmox";
  const {status, data} = await send(config.save, config.method, body);
  if (status === 200 || status === 201) {
    window.location.assign(`${config.page}?saved=${encodeURIComponent(data.name)}`);
  } else if (status === 400) {
    showFieldErrors(data);
  } else {
    showErrors([data.detail || `answered ${status}`]);
  }
});
document.querySelectorAll("button.archive").forEach((button) => {
  button.addEventListener("click", async () => {
    const {status, data} = await send(button.dataset.url, "POST", {});
    if (status === 200) window.location.reload();
    else showErrors([data.detail || `answered ${status}`]);
  });
});
showTlsFields();

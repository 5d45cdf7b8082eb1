// The guest view: sort by a column (click its heading, again to reverse; or the "sort by"
// menu on a phone, where the headings are hidden) and filter by text and node, in the browser.
"use strict";

const table = document.getElementById("guests");
const rows = Array.from(table.tBodies[0].rows).filter((row) => row.cells.length > 1);
const state = {col: 0, descending: false};

function key(row, col) {
  const cell = row.cells[col];
  const value = cell.dataset.sort ?? cell.textContent;
  const number = Number(value);
  return value !== "" && !Number.isNaN(number) ? number : value.toLowerCase();
}

function sort() {
  const sign = state.descending ? -1 : 1;
  rows.sort((a, b) => {
    const x = key(a, state.col), y = key(b, state.col);
    if (typeof x === "number" && typeof y === "number") return sign * (x - y);
    return sign * String(x).localeCompare(String(y), undefined, {numeric: true});
  });
  table.tBodies[0].append(...rows);
  table.querySelectorAll("th").forEach((th) => th.removeAttribute("aria-sort"));
  const heading = table.querySelector(`button.sort[data-col="${state.col}"]`);
  if (heading) heading.closest("th").setAttribute("aria-sort", state.descending ? "descending" : "ascending");
  document.getElementById("guest-sort").value = String(state.col);
}

function filter() {
  const words = document.getElementById("guest-filter").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  const node = document.getElementById("guest-node").value;
  let shown = 0;
  rows.forEach((row) => {
    const text = row.textContent.toLowerCase();
    const visible = (!node || row.dataset.node === node) && words.every((w) => text.includes(w));
    row.hidden = !visible;
    if (visible) shown += 1;
  });
  document.getElementById("guest-count").textContent = shown;
}

table.querySelectorAll("button.sort").forEach((button) => {
  button.onclick = () => {
    const col = Number(button.dataset.col);
    state.descending = state.col === col ? !state.descending : false;
    state.col = col;
    sort();
  };
});
document.getElementById("guest-sort").onchange = (event) => {
  state.col = Number(event.target.value);
  state.descending = false;
  sort();
};
document.getElementById("guest-filter").oninput = filter;
document.getElementById("guest-node").onchange = filter;

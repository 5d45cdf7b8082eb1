// Fractions (0–1) are all the server sends, in its JSON and in its pages; this file is the page's
// one conversion to percent (and back, for what the admin types in percent). The server writes a
// figure as <data class="pct" value="0.25"> ("25.0 %"; data-digits="0" for "25 %") or
// <data class="points" value="-0.03"> ("3 points", a change of a share); this fills them in.
"use strict";

const percent = (fraction) => fraction * 100;
const fromPercent = (typed) => typed / 100;
const pct = (fraction, digits = 1) => percent(fraction).toFixed(digits) + " %";

function showFractions(root = document) {
  root.querySelectorAll("data.pct").forEach((d) => { d.textContent = pct(Number(d.value), Number(d.dataset.digits ?? 1)); });
  root.querySelectorAll("data.points").forEach((d) => { d.textContent = `${Math.abs(Math.round(percent(Number(d.value))))} points`; });
}

document.addEventListener("DOMContentLoaded", () => showFractions());

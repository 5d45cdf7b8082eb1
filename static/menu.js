// On a phone (≤ 480 px) the header folds its links and the account into one "Menu" button, so
// the page's first figure is on the first screen. Without this script nothing folds.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const header = document.querySelector("header.top");
  const button = header?.querySelector(".menu-button");
  if (!button) return;
  header.classList.add("folding");
  button.onclick = () => {
    const open = header.classList.toggle("open");
    button.setAttribute("aria-expanded", String(open));
  };
});

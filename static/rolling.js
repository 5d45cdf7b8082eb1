// The rolling maintenance page: its queue and N+1 verdict refreshed every two seconds (the
// same page fetched again, its live part swapped in), unless the admin is using a form there.
"use strict";

const live = document.getElementById("rolling-live");

async function refresh() {
  if (live.contains(document.activeElement) && document.activeElement !== document.body) return;
  try {
    const answer = await fetch(window.location.pathname, {headers: {Accept: "text/html"}});
    if (!answer.ok) return;
    const fresh = new DOMParser().parseFromString(await answer.text(), "text/html").getElementById("rolling-live");
    if (fresh && fresh.innerHTML !== live.innerHTML) live.innerHTML = fresh.innerHTML;
  } catch {
    // offline for a moment: the next refresh tries again
  }
}

setInterval(refresh, 2000);

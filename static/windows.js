// The automation panel's moments in the browser's time zone too, labelled (times.js's ZONE),
// beside the cluster's wall time the server wrote: windows are defined in the cluster's zone.
"use strict";

const WEEK_CLOCK = new Intl.DateTimeFormat([], {weekday: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23"});

document.querySelectorAll(".moment[data-at]").forEach((span) => {
  span.insertAdjacentText("afterend", ` = ${WEEK_CLOCK.format(new Date(span.dataset.at))} ${ZONE} your time`);
});
document.querySelectorAll(".span-local[data-from]").forEach((span) => {
  if (!span.dataset.from || span.dataset.from === "None") return;
  span.textContent = `${WEEK_CLOCK.format(new Date(span.dataset.from))} – ${WEEK_CLOCK.format(new Date(span.dataset.to))} ${ZONE}`;
});

// Every page's moments in one time zone, the browser's, labelled ("14:05:12 CET"), with the
// UTC time in the tooltip and how long ago, ticking. The server writes <time datetime="...">
// in UTC (readable without JavaScript); this rewrites them, and dashboard.js uses stamp().
"use strict";

const ZONE = new Intl.DateTimeFormat([], {timeZoneName: "short"}).formatToParts(new Date())
  .find((part) => part.type === "timeZoneName").value;
const CLOCK = new Intl.DateTimeFormat([], {hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23"});
const DAY = new Intl.DateTimeFormat([], {year: "numeric", month: "2-digit", day: "2-digit"});

function clock(iso) {
  const at = new Date(iso);
  const today = DAY.format(at) === DAY.format(new Date());
  return `${today ? "" : DAY.format(at) + " "}${CLOCK.format(at)} ${ZONE}`;
}

function ago(iso) {
  const seconds = Math.max(0, Math.round((Date.now() - new Date(iso)) / 1000));
  if (seconds < 90) return `${seconds} s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3600)} h ago`;
}

// A <time> element showing a moment: local clock with its zone, how long ago (ticking), UTC on hover.
function stamp(element, iso) {
  if (!iso) return;
  element.dateTime = iso;
  element.title = new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  element.textContent = `${clock(iso)} (${ago(iso)})`;
}

// Relative times tick: every shown moment is re-stamped each second.
function restamp() {
  document.querySelectorAll("time[datetime]").forEach((t) => stamp(t, t.dateTime));
}
restamp();
setInterval(restamp, 1000);

// Every page's moments in one time zone, the browser's, labelled ("14:05:12 UTC+1"), with the
// UTC time in the tooltip and how long ago, ticking. The server writes <time datetime="...">
// in UTC (readable without JavaScript); this rewrites them, and dashboard.js uses stamp().
"use strict";

// The zone is labelled by its offset from UTC at that moment ("UTC+1", "UTC-5", "UTC+5:30"):
// the browser's own zone names (Intl.DateTimeFormat) cost a 50–550 ms start-up of its date
// patterns on every page load, the longest task the live page had left (bench/README.md).
function zoneOf(at) {
  const minutes = -at.getTimezoneOffset(), whole = Math.abs(minutes);
  if (!minutes) return "UTC";
  const rest = whole % 60 ? ":" + two(whole % 60) : "";
  return `UTC${minutes < 0 ? "-" : "+"}${Math.floor(whole / 60)}${rest}`;
}
const two = (n) => String(n).padStart(2, "0");
const ZONE = zoneOf(new Date());

function clock(iso) {
  const at = new Date(iso);
  const day = at.toDateString() === new Date().toDateString() ? "" :
    `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())} `;
  return `${day}${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())} ${zoneOf(at)}`;
}

// How long ago, or how long until (a token's expiry); a few seconds of clock skew count as now.
function ago(iso) {
  const seconds = Math.round((Date.now() - new Date(iso)) / 1000), span = Math.abs(seconds);
  const text = span < 90 ? `${span} s` : span < 5400 ? `${Math.round(span / 60)} min` :
    span < 172800 ? `${Math.round(span / 3600)} h` : `${Math.round(span / 86400)} days`;
  return seconds > -5 ? `${seconds < 0 ? "0 s" : text} ago` : `in ${text}`;
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

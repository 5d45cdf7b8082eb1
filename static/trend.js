// The imbalance trend. Its first view is a small SVG drawn here from the history the page
// already fetched: Plotly's start-up is one 300–500 ms task that would block the page for
// every admin who opens it (bench/README.md, Lighthouse). Plotly (zoom, pan, values on hover)
// loads only when the admin reaches for the chart — pointer over it, a touch, keyboard
// focus — and then takes over with the same points, axis and colours.
// Uses times.js (ZONE, clock) for the browser's time zone, like every moment on the page, and
// units.js (percent, pct) for its figures, which arrive as fractions.
"use strict";

const TREND_POINTS = 5000;  // the most the chart keeps
const SVG_NS = "http://www.w3.org/2000/svg";
// rounds: the shown range's points; markers: the migrations started in it; range: its name (3h … 90d).
const trend = {rounds: [], markers: [], range: "3h", plotly: null, element: null, padded: false};

// A moment as its wall clock in the browser's zone, in milliseconds: the axis is drawn in it,
// and Plotly, which draws a date string's wall clock as written, is handed the same.
function wallMs(iso) {
  const at = new Date(iso);
  return at.getTime() - at.getTimezoneOffset() * 60000;
}
const wallText = (ms) => new Date(ms).toISOString().slice(0, 23).replace("T", " ");

// Round steps for an axis: the first that gives at most `count` ticks over `span`.
function niceStep(span, count, steps) {
  return steps.find((step) => span / step <= count) || steps[steps.length - 1];
}
const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
  172800, 604800, 1209600].map((s) => s * 1000);
const DAY_MS = 86400000;

// A migration marker's hover: guest, from → to, who approved.
const markerText = (m) => `${m.guests.join(", ")}: ${m.source} → ${m.target}, ` +
  (m.approved_by === "automatic" ? "approved automatically" : `approved by ${m.approved_by || "nobody"}`) +
  ` (${m.state})`;
const PERCENT_STEPS = [0.5, 1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200, 500, 1000];

// The time axis: the rounds' span, at least a minute (one round, or a few, still get readable ticks).
function axisSpan(times) {
  const start = Math.min(...times), end = Math.max(...times);
  if (end - start >= 60000) return [start, end];
  const mid = (start + end) / 2;
  return [mid - 30000, mid + 30000];
}

function svgTrend(rounds, marks, width) {
  const height = 326, left = 50, right = 12, top = 60, bottom = 46;  // as Plotly's layout below
  const plotW = Math.max(10, width - left - right), plotH = height - top - bottom;
  const times = rounds.map((r) => wallMs(r.at));
  const [start, end] = axisSpan(times.concat(marks.map((m) => wallMs(m.at))));  // a live marker may lead the rounds
  const values = rounds.flatMap((r) => [percent(r.imbalance), percent(r.threshold)]);
  const yStep = niceStep(Math.max(...values, 1) * 1.1, 5, PERCENT_STEPS);
  const yMax = Math.ceil(Math.max(...values, 1) * 1.1 / yStep) * yStep;
  const x = (ms) => left + (ms - start) / (end - start) * plotW;
  const y = (value) => top + plotH - value / yMax * plotH;
  const parts = [];
  for (let v = 0; v <= yMax + 1e-9; v += yStep) {
    parts.push(`<line class="grid" x1="${left}" x2="${left + plotW}" y1="${y(v)}" y2="${y(v)}"/>`,
               `<text class="tick" x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${+v.toFixed(1)}</text>`);
  }
  const xStep = niceStep(end - start, Math.max(2, Math.floor(plotW / 90)), TIME_STEPS);
  const format = xStep < 60000 ? 19 : 16;  // seconds shown only when ticks are seconds apart
  const label = (t) => (xStep >= DAY_MS ? wallText(t).slice(5, 10) : wallText(t).slice(11, format));  // days: MM-DD
  for (let t = Math.ceil(start / xStep) * xStep; t <= end; t += xStep) {
    parts.push(`<line class="grid" x1="${x(t)}" x2="${x(t)}" y1="${top}" y2="${top + plotH}"/>`,
               `<text class="tick" x="${x(t)}" y="${top + plotH + 16}" text-anchor="middle">${label(t)}</text>`);
  }
  // Migrations that started: a triangle at the imbalance they started from, their move in a tooltip.
  for (const m of marks) {
    const mx = x(wallMs(m.at)), my = y(percent(m.imbalance_before));
    if (mx < left || mx > left + plotW) continue;
    parts.push(`<path class="marker" d="M${(mx - 5).toFixed(1)},${(my - 9).toFixed(1)}h10l-5,9z"><title>${escapeXml(markerText(m))}</title></path>`);
  }
  const imbalance = rounds.map((r, i) => `${x(times[i]).toFixed(1)},${y(percent(r.imbalance)).toFixed(1)}`);
  // The threshold holds from its round to the next, and on to the right edge: always a visible line.
  const threshold = rounds.flatMap((r, i) => {
    const level = y(percent(r.threshold)).toFixed(1);
    return [`${x(times[i]).toFixed(1)},${level}`, `${x(i + 1 < rounds.length ? times[i + 1] : end).toFixed(1)},${level}`];
  });
  if (rounds.length) threshold.unshift(`${left},${threshold[0].split(",")[1]}`);
  const markers = rounds.length <= 120 ? imbalance : imbalance.slice(-1);
  const last = rounds[rounds.length - 1];
  // In its own band above the plot, where Plotly puts it too; it fits a 360 px phone.
  const legend = `<g class="legend"><line class="imbalance" x1="8" x2="30" y1="38" y2="38"/>` +
    `<text x="36" y="42">imbalance ${pct(last.imbalance)}</text>` +
    `<line class="threshold" x1="165" x2="187" y1="38" y2="38"/>` +
    `<text x="193" y="42">threshold ${pct(last.threshold)}</text></g>`;
  const summary = `Imbalance ${pct(last.imbalance)} at ${clock(last.at)}, threshold ` +
    `${pct(last.threshold)}; ${rounds.length} rounds shown.`;
  return `<svg xmlns="${SVG_NS}" class="trend-svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}"` +
    ` role="img" aria-label="${summary}" data-points="${rounds.length}">` + parts.join("") + legend +
    `<text class="axis-title" x="${left + plotW / 2}" y="${height - 6}" text-anchor="middle">time (${ZONE})</text>` +
    `<text class="axis-title" x="14" y="${top + plotH / 2}" text-anchor="middle" transform="rotate(-90 14 ${top + plotH / 2})">%</text>` +
    `<polyline class="threshold" points="${threshold.join(" ")}"/>` +
    `<polyline class="imbalance" points="${imbalance.join(" ")}"/>` +
    markers.map((p) => { const [cx, cy] = p.split(","); return `<circle class="imbalance" cx="${cx}" cy="${cy}" r="2.5"/>`; }).join("") +
    `</svg>`;
}

const escapeXml = (text) => text.replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})[c]);

function drawSvg() {
  const element = trend.element;
  if (!trend.rounds.length) return;
  element.innerHTML = svgTrend(trend.rounds, trend.markers, element.clientWidth || 600);
}

// Plotly once, from its hashed static URL (the page's config "plotly").
function loadPlotly(url) {
  trend.plotly ??= new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = url;
    script.onload = resolve;
    script.onerror = reject;
    document.head.append(script);
  }).then(drawPlotly);
  return trend.plotly;
}

function drawPlotly() {
  const style = getComputedStyle(document.documentElement);
  const colour = (name) => style.getPropertyValue(name).trim();
  const times = trend.rounds.map((r) => wallMs(r.at));
  const x = times.map(wallText);
  const thresholds = trend.rounds.map((r) => percent(r.threshold));
  // Like the SVG: a minute of axis at least, and the threshold drawn from its left edge.
  const span = times.length ? axisSpan(times) : null;
  trend.padded = span !== null && span[1] - span[0] > Math.max(...times) - Math.min(...times);
  const range = span ? span.map(wallText) : undefined;
  const traces = [
    {x: x, y: trend.rounds.map((r) => percent(r.imbalance)), name: "imbalance", mode: "lines+markers",
     line: {color: colour("--bar")}, marker: {size: 4}},
    {x: range ? [range[0], ...x] : [], y: range ? [thresholds[0], ...thresholds] : [], name: "threshold", mode: "lines",
     line: {color: colour("--threshold"), dash: "dash", width: 2, shape: "hv"}},
    {x: trend.markers.map((m) => wallText(wallMs(m.at))), y: trend.markers.map((m) => percent(m.imbalance_before)),
     text: trend.markers.map(markerText), hoverinfo: "text", name: "migration", mode: "markers",
     marker: {symbol: "triangle-down", size: 11, color: colour("--text")}},
  ];
  const short = trend.range === "3h" || trend.range === "24h";
  // The legend sits in its own band above the plot, below Plotly's mode bar (top right).
  const layout = {margin: {t: 60, r: 12, b: 46, l: 50}, height: 326, paper_bgcolor: "rgba(0,0,0,0)",
                  plot_bgcolor: "rgba(0,0,0,0)", font: {color: colour("--text")},
                  xaxis: {title: {text: `time (${ZONE})`}, gridcolor: colour("--line"), tickformat: short ? "%H:%M" : "%b %d",
                          range: trend.padded ? range : undefined,
                          hoverformat: "%Y-%m-%d %H:%M:%S"},
                  yaxis: {title: {text: "%"}, rangemode: "tozero", gridcolor: colour("--line")},
                  legend: {orientation: "h", x: 0, y: 1.02, yanchor: "bottom"}};
  trend.element.replaceChildren();
  Plotly.newPlot(trend.element, traces, layout, {displaylogo: false, responsive: true});
}

// The chart in `element`: the SVG now, Plotly when the admin reaches for it.
function trendStart(element, plotlyUrl) {
  trend.element = element;
  element.tabIndex = 0;  // keyboard users reach the interactive chart too
  const upgrade = () => loadPlotly(plotlyUrl);
  for (const event of ["pointerenter", "pointerdown", "focusin"]) element.addEventListener(event, upgrade, {once: true});
  new ResizeObserver(() => { if (!element.data) drawSvg(); }).observe(element);
}

// One range of history (a page load, a reconnect, another range chosen): {points, markers}.
function trendShow(data, range) {
  trend.rounds = data.points.slice(-TREND_POINTS);
  trend.markers = data.markers.slice();
  trend.range = range;
  if (trend.element.data) drawPlotly();
  else drawSvg();
}

// One more round, pushed live.
function trendAdd(r) {
  trend.rounds.push(r);
  if (trend.rounds.length > TREND_POINTS) trend.rounds.shift();
  if (trend.element.data) {
    const at = wallText(wallMs(r.at));
    Plotly.extendTraces(trend.element, {x: [[at], [at]], y: [[percent(r.imbalance)], [percent(r.threshold)]]}, [0, 1], TREND_POINTS);
    if (trend.padded) drawPlotly();  // the minute of axis padding lasts only until the rounds span it
  } else {
    drawSvg();
  }
}

// A migration that started, marked live.
function trendMark(mark) {
  trend.markers.push(mark);
  if (trend.element.data) {
    Plotly.extendTraces(trend.element, {x: [[wallText(wallMs(mark.at))]], y: [[percent(mark.imbalance_before)]],
                                        text: [[markerText(mark)]]}, [2]);
  } else {
    drawSvg();
  }
}

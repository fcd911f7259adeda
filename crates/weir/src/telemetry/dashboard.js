// Self-contained: no external assets. Text goes in through textContent or esc().
const WAVE_FILL = 0.9;
const PALETTE = ["#1e88e5", "#e53935", "#43a047", "#fb8c00", "#8e24aa", "#00897b", "#6d4c41", "#3949ab", "#c0ca33", "#d81b60"];
const STATES = ["starting", "running", "paused", "backpressured", "degraded", "failed", "stopped"];
const hist = { t: [], series: new Map(), capacity: 900, forecast: null };
let busy = false;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function esc(s) {
  return String(s).replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function fillClass(fill) {
  if (fill === null || fill === undefined) return "f-none";
  if (fill >= WAVE_FILL) return "f-high";
  if (fill >= 0.5) return "f-mid";
  return "f-low";
}

// ---- history: fetched whole once, then only what is newer, kept to its capacity ----
function mergeHistory(h) {
  hist.capacity = h.capacity;
  hist.forecast = h.wal_forecast;
  for (const s of h.series) {
    let mine = hist.series.get(s.name);
    if (!mine) { mine = { kind: s.kind, unit: s.unit, values: new Array(hist.t.length).fill(null) }; hist.series.set(s.name, mine); }
    mine.values.push(...s.values);
  }
  hist.t.push(...h.t_unix_ms);
  const extra = hist.t.length - hist.capacity;
  if (extra > 0) {
    hist.t.splice(0, extra);
    for (const s of hist.series.values()) s.values.splice(0, extra);
  }
}
function values(name) { const s = hist.series.get(name); return s ? s.values : []; }
function last(name) { const v = values(name); for (let i = v.length - 1; i >= 0; i--) if (v[i] !== null) return v[i]; return null; }
// Per-second rates of a counter, one per sample, smoothed (smoothRates: exponentially
// weighted, 10 s time constant): a sink storing 1,024 records every 2 s reads about
// 512/s, not 0 and 1,024 in turn.
function rates(name) { return smoothRates(hist.t, values(name)); }
function lastRate(name) { const r = rates(name); return r.length ? r[r.length - 1] : null; }
// Whether a counter grew over its last 5 samples (what is happening now).
function growing(name) { return grewRecently(values(name), 5); }

// ---- the wave: which component is slow, and whom it holds up ----
function findWave(status) {
  const wal = status.wal || {};
  const sources = status.sources || {};
  const sinks = status.sinks || {};
  const comps = status.components;
  const state = (kind, name) => (comps.find(c => c.kind === kind && c.name === name) || {}).state;
  const held = comps.filter(c => c.kind === "source" && (c.state === "backpressured" || c.state === "paused"))
    .map(c => ({ name: c.name, state: c.state, waited: ((sources[c.name] || {}).waiting_ms || 0) / 1000 || c.for_seconds }));
  const refusing = Object.keys(sources).filter(n => growing("sources." + n + ".refused_records") || growing("sources." + n + ".refused_requests"));
  const queue = n => status.queues.find(q => q.name === "wal->" + n);
  // The slow sink: the one the WAL keeps data for (required, not released) furthest behind;
  // a failed or retrying sink first.
  const ranked = Object.entries(sinks).map(([name, s]) => {
    const c = s.cursor || {};
    const pins = c.required !== false && !c.released;
    const growing = (lastRate("sinks." + name + ".lag_records") || 0);
    const score = (state("sink", name) === "failed" ? 4 : 0) + (pins ? 2 : 0) + ((c.lag_bytes || 0) > 0 ? 1 : 0);
    return { name, s, c, pins, score, lag: c.lag_bytes || 0, growing };
  }).sort((a, b) => b.score - a.score || b.lag - a.lag);
  const slow = ranked.length && (ranked[0].lag > 0 || ranked[0].score >= 4) ? ranked[0] : null;
  const budget = wal.budget_used || 0;
  const pressed = budget >= WAVE_FILL || held.length > 0 || refusing.length > 0;
  const failed = comps.filter(c => c.state === "failed");
  const degraded = comps.filter(c => c.state === "degraded");
  return { slow, held, refusing, budget, pressed, failed, degraded, onFull: wal.on_full, queue };
}
function renderWave(status, w) {
  const box = document.getElementById("wave");
  const parts = [];
  if (w.failed.length) parts.push(["broken", "Failed: " + w.failed.map(c => esc(c.kind + " " + c.name + (c.reason ? " (" + c.reason + ")" : ""))).join(", ")]);
  if (w.degraded.length) parts.push(["broken", "Losing records: " + w.degraded.map(c => esc(c.kind + " " + c.name + (c.reason ? " (" + c.reason + ")" : ""))).join(", ")]);
  if (w.pressed && w.slow) {
    let text = "Backpressure wave: slow sink <code>" + esc(w.slow.name) + "</code> (" + bytes(w.slow.lag) + " behind, " + secs((w.slow.c.lag_age_ms || 0) / 1000) + " old)"
      + " → WAL " + Math.round(w.budget * 100) + "% of budget (on_full = " + esc(w.onFull) + ")";
    const tail = w.held.map(h => "<code>" + esc(h.name) + "</code> " + (h.state === "paused" ? "paused " : "blocked ") + secs(h.waited))
      .concat(w.refusing.map(n => "<code>" + esc(n) + "</code> refusing " + num(lastRate("sources." + n + ".refused_records")) + " records/s"));
    if (tail.length) text += " → " + tail.join(", ");
    parts.push(["front", text]);
  } else if (w.pressed) {
    parts.push(["front", "Backpressure: WAL " + Math.round(w.budget * 100) + "% of budget; held: " + w.held.map(h => esc(h.name)).join(", ")]);
  } else if (w.slow && w.slow.growing > 0) {
    parts.push(["front", "Sink <code>" + esc(w.slow.name) + "</code> is falling behind (" + bytes(w.slow.lag) + ", growing " + num(w.slow.growing) + " records/s); WAL " + Math.round(w.budget * 100) + "% of budget"]);
  }
  if (!parts.length) {
    box.className = "calm";
    box.textContent = "No backpressure: the WAL is at " + Math.round(w.budget * 100) + "% of its budget and no source is held back.";
    return;
  }
  box.className = parts.some(p => p[0] === "broken") ? "broken" : "front";
  box.innerHTML = parts.map(p => "<div>" + p[1] + "</div>").join("");
}

// ---- the pipeline graph: sources → WAL → sinks ----
function renderGraph(status, w) {
  const comps = status.components;
  const sources = comps.filter(c => c.kind === "source"), sinks = comps.filter(c => c.kind === "sink");
  const wal = comps.find(c => c.kind === "wal") || { name: "wal", state: "starting" };
  const rowH = 66, n = Math.max(sources.length, sinks.length, 1), H = Math.max(n * rowH + 12, 120), W = 960;
  const nodeW = 200, nodeH = 50;
  const y = (i, count) => H / 2 + (i - (count - 1) / 2) * rowH;
  const heldNames = new Set(w.held.map(h => h.name).concat(w.refusing));
  const onWave = { wal: w.pressed && !!w.slow };
  let svg = '<svg viewBox="0 0 ' + W + " " + H + '" id="graph-svg">';
  // An edge's label sits above its outer end (the source's or the sink's side), clear of the WAL.
  const edge = (x1, y1, x2, y2, label, hot, id, outer) => {
    const mx = (x1 + x2) / 2;
    const lx = outer === "left" ? x1 + 6 : x2 - 6, ly = (outer === "left" ? y1 : y2) - 7;
    svg += '<g class="edge' + (hot ? " on-wave" : "") + '" data-edge="' + esc(id) + '"><path d="M' + x1 + " " + y1 + " C" + mx + " " + y1 + " " + mx + " " + y2 + " " + x2 + " " + y2 + '"/>'
      + '<text x="' + lx + '" y="' + ly + '" text-anchor="' + (outer === "left" ? "start" : "end") + '">' + esc(label) + "</text></g>";
  };
  const node = (x, yy, c, sub, hot) => {
    svg += '<g class="node s-' + esc(c.state) + (hot ? " on-wave" : "") + '" data-node="' + esc(c.kind + ":" + c.name) + '">'
      + '<rect x="' + (x - nodeW / 2) + '" y="' + (yy - nodeH / 2) + '" width="' + nodeW + '" height="' + nodeH + '"/>'
      + '<text class="name" x="' + x + '" y="' + (yy - 9) + '" text-anchor="middle">' + esc(c.name) + "</text>"
      + sub.map((line, k) => '<text class="sub" x="' + x + '" y="' + (yy + 5 + 12 * k) + '" text-anchor="middle">' + esc(line) + "</text>").join("") + "</g>";
  };
  const xs = nodeW / 2 + 4, xw = W / 2, xk = W - nodeW / 2 - 4, yw = H / 2;
  const srcQ = status.queues.find(q => q.name === "source->wal");
  sources.forEach((c, i) => {
    const r = lastRate("sources." + c.name + ".records"), b = lastRate("sources." + c.name + ".bytes");
    edge(xs + nodeW / 2, y(i, sources.length), xw - nodeW / 2, yw, num(r) + " rec/s · " + bytes(b) + "/s", onWave.wal && heldNames.has(c.name), c.name + "->wal", "left");
  });
  sinks.forEach((c, i) => {
    const r = lastRate("sinks." + c.name + ".records"), b = lastRate("sinks." + c.name + ".bytes");
    edge(xw + nodeW / 2, yw, xk - nodeW / 2, y(i, sinks.length), num(r) + " rec/s · " + bytes(b) + "/s", onWave.wal && w.slow && w.slow.name === c.name, "wal->" + c.name, "right");
  });
  sources.forEach((c, i) => {
    const s = (status.sources || {})[c.name] || {};
    node(xs, y(i, sources.length), c, [(s.type || "source") + " · " + c.state, "for " + secs(c.for_seconds)], onWave.wal && heldNames.has(c.name));
  });
  const walStat = status.wal || {};
  node(xw, yw, wal, [wal.state + " · " + Math.round((walStat.budget_used || 0) * 100) + "% of " + bytes(walStat.max_disk), "input queue " + (srcQ && srcQ.fill !== null ? Math.round(srcQ.fill * 100) + "%" : "–")], onWave.wal);
  sinks.forEach((c, i) => {
    const s = (status.sinks || {})[c.name] || {};
    const lag = (s.cursor || {}).lag_bytes, q = w.queue(c.name);
    const fill = q && q.fill !== null ? " · queue " + Math.round(q.fill * 100) + "%" : "";
    node(xk, y(i, sinks.length), c, [(s.type || "sink") + " · " + c.state, "lag " + bytes(lag) + fill], onWave.wal && w.slow && w.slow.name === c.name);
  });
  svg += "</svg>";
  document.getElementById("graph").innerHTML = svg;
}

// ---- the WAL gauge and forecast ----
function renderGauge(status) {
  const wal = status.wal || {};
  const used = Math.min(1, wal.budget_used || 0);
  const a = Math.PI * (1 - used), r = 42, cx = 50, cy = 50;
  const x = cx + r * Math.cos(a), yy = cy - r * Math.sin(a);
  const color = used >= WAVE_FILL ? "#c62828" : used >= 0.5 ? "#e69500" : "#2e7d32";
  document.getElementById("wal-arc").innerHTML = '<svg viewBox="0 0 100 56" width="120"><path d="M8 50 A42 42 0 0 1 92 50" fill="none" stroke="#eceff1" stroke-width="10"/>'
    + (used > 0 ? '<path d="M8 50 A42 42 0 0 1 ' + x.toFixed(2) + " " + yy.toFixed(2) + '" fill="none" stroke="' + color + '" stroke-width="10"/>' : "") + "</svg>";
  document.getElementById("wal-pct").textContent = Math.round(used * 100) + "%";
  document.getElementById("wal-used").textContent = bytes(wal.disk_bytes) + " of " + bytes(wal.max_disk) + " · on_full = " + wal.on_full;
  const f = hist.forecast, box = document.getElementById("forecast");
  if (!f || f.net_bytes_per_second === null || f.net_bytes_per_second === undefined) box.textContent = "Forecast: waiting for two samples.";
  else if (f.full_in_seconds === 0 || used >= 0.98) box.textContent = "Full now (" + (wal.on_full === "block" ? "sources wait" : wal.on_full === "reject" ? "sources refuse" : "oldest segments evicted") + ").";
  else if (f.full_in_seconds !== null && f.full_in_seconds !== undefined) box.textContent = "Full in " + secs(f.full_in_seconds) + " at the trend of the last minute (+" + bytes(f.net_bytes_per_second) + "/s).";
  else if (f.trend === "shrinking") box.textContent = "Not filling: shrinking " + bytes(-f.net_bytes_per_second) + "/s over the last minute.";
  else box.textContent = "Not filling: steady over the last minute.";
}

function renderSinkTable(status, w) {
  const body = document.getElementById("sinks");
  body.replaceChildren();
  for (const [name, s] of Object.entries(status.sinks || {})) {
    const c = s.cursor || {};
    const row = el("tr", w.slow && w.slow.name === name && w.pressed ? "at-wave" : "");
    const ml = maxLagText(s.max_lag);
    row.append(el("td", "", name), el("td", "", num(c.committed)),
      el("td", "", num(c.lag_records) + " rec · " + bytes(c.lag_bytes)), el("td", "", secs((c.lag_age_ms || 0) / 1000)),
      el("td", "", ml), el("td", "", c.required === false ? "no" : c.released ? "yes (released)" : "yes"));
    body.append(row);
  }
}

// ---- charts: hand-drawn SVG polylines over the ring's time span ----
function chart(title, lines, fmt) {
  const W = 300, H = 130, L = 42, R = 4, T = 6, B = 16;
  let n = 0, max = 0;
  for (const l of lines) for (const v of l.values) if (v !== null && isFinite(v)) { n++; max = Math.max(max, v); }
  if (max <= 0) max = 1;
  const t0 = hist.t[0], t1 = hist.t[hist.t.length - 1];
  const span = Math.max(1, t1 - t0);
  const xOf = i => L + (hist.t[i] - t0) / span * (W - L - R), yOf = v => T + (1 - v / max) * (H - T - B);
  let svg = '<svg viewBox="0 0 ' + W + " " + H + '" preserveAspectRatio="none" data-points="' + n + '">'
    + '<line class="axis" x1="' + L + '" y1="' + (H - B) + '" x2="' + (W - R) + '" y2="' + (H - B) + '"/>'
    + '<line class="axis" x1="' + L + '" y1="' + T + '" x2="' + L + '" y2="' + (H - B) + '"/>'
    + '<text class="tick" x="' + (L - 3) + '" y="' + (T + 8) + '" text-anchor="end">' + esc(fmt(max)) + "</text>"
    + '<text class="tick" x="' + (L - 3) + '" y="' + (H - B) + '" text-anchor="end">0</text>';
  if (hist.t.length > 1) {
    svg += '<text class="tick" x="' + L + '" y="' + (H - 3) + '">−' + esc(secs(span / 1000)) + '</text><text class="tick" x="' + (W - R) + '" y="' + (H - 3) + '" text-anchor="end">now</text>';
  }
  lines.forEach((l, k) => {
    const pts = [];
    l.values.forEach((v, i) => { if (v !== null && isFinite(v)) pts.push(xOf(i).toFixed(1) + "," + yOf(v).toFixed(1)); });
    if (pts.length) svg += '<polyline stroke="' + PALETTE[k % PALETTE.length] + '" points="' + pts.join(" ") + '"><title>' + esc(l.name) + "</title></polyline>";
  });
  if (!n) svg += '<text class="empty" x="' + (W / 2) + '" y="' + (H / 2) + '" text-anchor="middle">no data yet</text>';
  svg += "</svg>";
  const legend = lines.map((l, k) => '<span><i style="background:' + PALETTE[k % PALETTE.length] + '"></i>' + esc(l.name) + "</span>").join("");
  return '<div class="chart panel"><h3>' + esc(title) + "</h3>" + svg + '<div class="legend">' + legend + "</div></div>";
}
function renderCharts(status) {
  const sources = status.components.filter(c => c.kind === "source").map(c => c.name);
  const sinks = status.components.filter(c => c.kind === "sink").map(c => c.name);
  const rateLines = sources.map(n => ({ name: n + " in", values: rates("sources." + n + ".records") }))
    .concat(sinks.map(n => ({ name: n + " out", values: rates("sinks." + n + ".records") })));
  const fix = (names, prefix, key, suffix) => names.map(n => ({ name: n + suffix, values: key(prefix + n) }));
  const refusals = fix(sources, "sources.", p => sum(rates(p + ".refused_records"), rates(p + ".refused_requests")), " refused")
    .concat(fix(sources, "sources.", p => rates(p + ".dropped"), " dropped"))
    .concat([{ name: "WAL evicted", values: rates("wal.evicted_records") }])
    .concat(fix(sinks, "sinks.", p => rates(p + ".gap_records"), " gap"))
    .concat(fix(sinks, "sinks.", p => sum(rates(p + ".unencodable"), rates(p + ".quarantine_dropped")), " quarantined"));
  const queueNames = status.queues.map(q => q.name).filter(q => hist.series.has("queues." + q + ".fill"));
  const html = [
    chart("Records per second, in and out (smoothed over 10 s)", rateLines, num),
    chart("WAL budget used (%)", [{ name: "WAL", values: values("wal.budget_used").map(v => v === null ? null : v * 100) }], v => v.toFixed(0) + "%"),
    chart("Sink lag (bytes)", fix(sinks, "sinks.", p => values(p + ".lag_bytes"), ""), bytes),
    chart("Sink lag (age of the oldest unread record)", fix(sinks, "sinks.", p => values(p + ".lag_age_ms").map(v => v === null ? null : v / 1000), ""), secs),
    chart("Queue fill (%)", queueNames.map(q => ({ name: q, values: values("queues." + q + ".fill").map(v => v === null ? null : v * 100) })), v => v.toFixed(0) + "%"),
    chart("Refusals, drops and gaps (records/s)", refusals, num),
  ];
  document.getElementById("charts").innerHTML = html.join("");
}
function sum(a, b) { return a.map((v, i) => v === null && b[i] === null ? null : (v || 0) + (b[i] || 0)); }

function renderQueues(queues) {
  const body = document.getElementById("queues");
  body.replaceChildren();
  for (const q of queues) {
    const row = el("tr", q.fill !== null && q.fill >= WAVE_FILL ? "at-wave" : "");
    row.append(el("td", "", q.name));
    const cell = el("td"), bar = el("div", "bar"), fill = el("span", fillClass(q.fill));
    fill.style.width = (q.fill === null ? 0 : Math.round(q.fill * 100)) + "%";
    bar.title = q.fill === null ? "no bound" : Math.round(q.fill * 100) + "% full";
    bar.append(fill); cell.append(bar); row.append(cell);
    row.append(el("td", "", q.depth + " / " + (q.bound_items ?? "∞")));
    row.append(el("td", "", bytes(q.bytes) + " / " + (q.bound_bytes === null ? "∞" : bytes(q.bound_bytes))));
    row.append(el("td", "", secs(q.oldest_age_seconds)));
    row.append(el("td", "", String(q.dropped)), el("td", "", String(q.rejected)), el("td", "", String(q.expired)));
    body.append(row);
  }
}

// ---- key/value panels: any section, any nested details (mqtt, http, nats, kafka, …) ----
function kvTable(obj) {
  const t = el("table");
  for (const [k, v] of Object.entries(obj)) {
    if (v !== null && typeof v === "object" && !Array.isArray(v)) continue;
    const r = el("tr");
    r.append(el("td", "", k), el("td", "", humanValue(k, v)));
    t.append(r);
  }
  return t;
}
function kvPanel(title, obj, depth) {
  const p = el("div", "panel kv");
  p.append(el("h3", "", title));
  p.append(kvTable(obj));
  const nest = (o, prefix, d) => {
    for (const [k, v] of Object.entries(o)) {
      if (v === null || typeof v !== "object" || Array.isArray(v)) continue;
      p.append(el("h4", "", prefix + k));
      p.append(kvTable(v));
      if (d < 3) nest(v, prefix + k + ".", d + 1);
    }
  };
  nest(obj, "", depth || 0);
  return p;
}
function renderPanels(status) {
  const src = document.getElementById("source-panels"), snk = document.getElementById("sink-panels"), other = document.getElementById("sections");
  src.replaceChildren(...Object.entries(status.sources || {}).map(([n, s]) => kvPanel(n + " (" + (s.type || "source") + ")", s)));
  snk.replaceChildren(...Object.entries(status.sinks || {}).map(([n, s]) => kvPanel(n + " (" + (s.type || "sink") + ")", s)));
  const known = new Set(["config_hash", "started_unix_ms", "uptime_seconds", "components", "queues", "sources", "sinks"]);
  other.replaceChildren(...Object.entries(status).filter(([k]) => !known.has(k)).map(([k, v]) => {
    const d = el("details");
    d.append(el("summary", "", k));
    d.append(v !== null && typeof v === "object" && !Array.isArray(v) ? kvPanel(k, v) : el("div", "panel", humanValue(k, v)));
    return d;
  }));
}

async function getJson(path) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 3000);
  try {
    const response = await fetch(path, { cache: "no-store", signal: ctl.signal });
    if (!response.ok) throw new Error(path + ": HTTP " + response.status);
    return await response.json();
  } finally { clearTimeout(timer); }
}
async function poll() {
  if (busy) return; // an overloaded daemon gets one request at a time from this page
  busy = true;
  try {
    const since = hist.t.length ? "?since=" + hist.t[hist.t.length - 1] : "";
    const [status, history] = await Promise.all([
      fetch("status", { cache: "no-store" }).then(r => { if (!r.ok) throw new Error("status: HTTP " + r.status); return r.json(); }),
      getJson("history" + since).catch(() => null),
    ]);
    if (history) mergeHistory(history);
    document.getElementById("meta").textContent = "config " + status.config_hash + " · up " + secs(status.uptime_seconds) + " · " + hist.t.length + " samples";
    document.getElementById("error").textContent = history ? "" : "history unavailable";
    const w = findWave(status);
    renderWave(status, w);
    renderGraph(status, w);
    renderGauge(status);
    renderSinkTable(status, w);
    renderCharts(status);
    renderQueues(status.queues);
    renderPanels(status);
    document.body.dataset.rendered = String(Number(document.body.dataset.rendered || 0) + 1);
  } catch (err) {
    document.getElementById("error").textContent = "status unavailable: " + err.message;
  } finally { busy = false; }
}
poll();
setInterval(poll, 1000);

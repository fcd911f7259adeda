"use strict";
// Figures for people and smoothed rates: the rules of weir's `cmd::human` and
// `telemetry::trend` in JavaScript (tests/dashboard_browser.rs runs them in a browser).

// Rates are exponentially weighted with this time constant, in seconds.
const RATE_TAU_S = 10;

function secs(s) {
  if (s === null || s === undefined || !isFinite(s)) return "–";
  if (s <= 0) return "0 s";
  if (s < 1e-3) return (s * 1e6).toFixed(0) + " µs";
  if (s < 1e-2) return (s * 1e3).toFixed(1) + " ms";
  if (s < 1) return (s * 1000).toFixed(0) + " ms";
  if (s < 120) return s.toFixed(1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}
// Exact binary units when whole ("8 MiB"), one decimal otherwise, bytes below 1 KiB.
function bytes(n) {
  if (n === null || n === undefined || !isFinite(n)) return "–";
  const neg = n < 0 ? "-" : "";
  n = Math.abs(n);
  if (n < 1024) return neg + Math.round(n) + " B";
  const units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
  let i = 0, scale = 1024;
  while (i + 1 < units.length && n / scale >= 1024) { i++; scale *= 1024; }
  const whole = Number.isInteger(n) && n % scale === 0;
  return neg + (whole ? String(n / scale) : (n / scale).toFixed(1)) + " " + units[i];
}
function num(n) {
  if (n === null || n === undefined || !isFinite(n)) return "–";
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return Math.abs(n) >= 100 || Number.isInteger(n) ? n.toFixed(0) : n.toFixed(1);
}
// A sink's max_lag from /status ({"bytes": 25165824, "age": "10m"}, either null):
// "24 MiB", "10m", "24 MiB, 10m" or "none".
function maxLagText(m) {
  if (!m || typeof m !== "object") return "none";
  const parts = [];
  if (typeof m.bytes === "number") parts.push(bytes(m.bytes));
  else if (typeof m.bytes === "string" && m.bytes) parts.push(m.bytes);
  if (typeof m.age === "string" && m.age) parts.push(m.age);
  else if (typeof m.age === "number") parts.push(String(m.age));
  return parts.length ? parts.join(", ") : "none";
}
function isoTime(ms) {
  const d = new Date(ms);
  return isNaN(d.getTime()) ? String(ms) : d.toISOString().replace(/\.\d{3}Z$/, "Z");
}
// A /status value by what its key says it is: a size for bytes, max_disk and *_bytes, a
// duration for *_ms, *_us and *_seconds, a time for *_unix_ms; ranges [a, b] as a..b.
function humanValue(key, v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v === "number") {
    if (key.endsWith("_unix_ms")) return isoTime(v);
    if (key === "bytes" || key === "max_disk" || key.endsWith("_bytes")) return bytes(v);
    if (key.endsWith("_ms")) return secs(v / 1e3);
    if (key.endsWith("_us")) return secs(v / 1e6);
    if (key.endsWith("_seconds")) return secs(v);
    if (!Number.isInteger(v)) {
      return v >= 0 && v <= 1 && (key.includes("used") || key.includes("fill")) ? Math.round(v * 100) + "%" : v.toFixed(3);
    }
    return String(v);
  }
  if (Array.isArray(v)) {
    if (!v.length) return "none";
    return v.map(x => Array.isArray(x) && x.length === 2 && x.every(y => typeof y === "number") ? x[0] + ".." + x[1]
      : x !== null && typeof x === "object" ? JSON.stringify(x) : humanValue(key, x)).join(", ");
  }
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}
// The exponentially weighted per-second rate of a counter sampled at times t (ms), one
// value per sample (null: not reported, stepped over): one rate per sample, null until
// two samples a positive time apart. Divided by the weight accumulated so far, so the
// first samples are not biased towards zero; a counter that goes down counts as zero.
function smoothRates(t, v, tauS) {
  const tau = tauS || RATE_TAU_S, out = new Array(v.length).fill(null);
  let prev = -1, est = 0, weight = 0;
  for (let i = 0; i < v.length; i++) {
    if (v[i] === null || v[i] === undefined || !isFinite(v[i])) { out[i] = weight > 0 ? est / weight : null; continue; }
    if (prev >= 0 && t[i] > t[prev]) {
      const dt = (t[i] - t[prev]) / 1000, rate = Math.max(0, v[i] - v[prev]) / dt, alpha = 1 - Math.exp(-dt / tau);
      est += alpha * (rate - est);
      weight += alpha * (1 - weight);
    }
    if (prev < 0 || t[i] > t[prev]) prev = i;
    out[i] = weight > 0 ? est / weight : null;
  }
  return out;
}
// Whether a counter grew over its last n samples: what is happening now (a smoothed
// rate fades over a minute).
function grewRecently(v, n) {
  const recent = [];
  for (let i = v.length - 1; i >= 0 && recent.length <= n; i--) if (v[i] !== null && v[i] !== undefined) recent.push(v[i]);
  return recent.length >= 2 && recent[0] > recent[recent.length - 1];
}

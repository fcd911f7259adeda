#!/usr/bin/env bash
# HTTP sink benchmark (not a test, not in CI): records/s that weir's `http` sink delivers
# into a fast local endpoint, next to a bare client posting the same batches at the
# same concurrency, with weir's CPU per record and peak RSS.
#
#   ./scripts/bench-http-sink.sh [--markdown] [SECONDS] [CONCURRENCY] [BATCH_RECORDS] [BACKLOG]
#       # defaults: 20 s, 8, 500, 2,000,000 records; --markdown: the tables for
#       # docs/benchmarks.md on stdout (the usual report on stderr)
#
# Two weir runs, each next to the same bare client in the same script run:
# - drain (the sink's own speed): the endpoint holds every request unanswered while a
#   generator writes BACKLOG records into the WAL; then it lets them through, and the
#   time until all BACKLOG records arrived is the sink's rate (WAL read → decode →
#   encode → POST, with the ordered stage and the AIMD limiter). weir's CPU and peak
#   RSS are taken over the drain.
# - live (the whole pipeline): generator (rate 0) → WAL (sync = "always" per batch) →
#   the sink, for SECONDS: bounded by the generator and the WAL's fsyncs as well.
# Records are 200 B payloads; the sink sends ndjson, no compression, with min = max
# concurrency = CONCURRENCY, to `cargo run --release --example http_sink_bench -- serve`
# (answers 200, counts lines). The bare client (`… -- client`) posts one pre-built body of
# the same envelopes from CONCURRENCY tasks over hyper-util's pooled client, the one the
# sink uses; the encoding client encodes each body anew from the same records with weir's
# NDJSON encoder (the work any forwarder of records does, without WAL, order or retries).
# The endpoint and the clients share the machine's cores with weir. So that the bench
# takes no CPU from what it measures, it waits for the drain with one request
# (`/wait/N`) rather than polling; it prints the machine's idle time over the drain,
# the endpoint's CPU per record (over the drain and over the bare run), the bare
# client's own CPU per record, and the CPU ceiling: with weir at w µs per record and
# the endpoint at e, the two cannot pass cores ÷ (w + e) records/s together.
# WEIR_BENCH_PERF=FILE records a `perf record -g` profile of weir over the drain into FILE.
set -euo pipefail
. "$(dirname "$0")/bench-markdown.sh" "$@"
set -- "${bench_args[@]+"${bench_args[@]}"}"
cd "$(dirname "$0")/.."
secs="${1:-20}" conc="${2:-8}" batch="${3:-500}" backlog="${4:-2000000}"
cargo build --release -q -p weir --bin weir --example http_sink_bench
target="${CARGO_TARGET_DIR:-target}/release"
work="$(mktemp -d)"
srv= pid=
trap 'for p in $pid $srv; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
port=19464 ep=19466
hz=$(getconf CLK_TCK)
"$target/examples/http_sink_bench" serve "127.0.0.1:$ep" &
srv=$!
for _ in $(seq 50); do curl -fsS "http://127.0.0.1:$ep/count" >/dev/null 2>&1 && break; sleep 0.1; done
count() { curl -fsS "http://127.0.0.1:$ep/count"; }
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
epcpu() { awk '{print $14 + $15}' "/proc/$srv/stat"; }
# The machine's idle ticks (all cores).
idle() { awk '/^cpu / {print $5 + $6}' /proc/stat; }
status() { curl -fsS "http://127.0.0.1:$port/status"; }

# config NAME GENERATOR_KEYS: a generator feeding the http sink, in its own data dir.
config() {
  cat >"$work/$1.toml" <<CONF
[runtime]
data_dir = "$work/$1"
status_addr = "127.0.0.1:$port"
shutdown_timeout = "2s"
[wal]
max_disk = "2 GiB"
segment_bytes = "64 MiB"
on_full = "block"
[sources.gen]
type = "generator"
size = 200
$2
[sinks.api]
type = "http"
inputs = ["gen"]
url = "http://127.0.0.1:$ep/ingest"
batch_records = $batch
batch_bytes = "16 MiB"
min_concurrency = $conc
max_concurrency = $conc
timeout = "300s"
CONF
}

start() {
  "$target/weir" run "$work/$1.toml" 2>"$work/$1.log" &
  pid=$!
  for _ in $(seq 100); do status >/dev/null 2>&1 && return; sleep 0.1; done
  echo "weir did not start: $(cat "$work/$1.log")" >&2
  exit 1
}

stop() {
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
}

# drain: the backlog first, held at the endpoint.
config drain "rate = 0
count = $backlog"
curl -fsS -X POST "http://127.0.0.1:$ep/hold" >/dev/null
start drain
until status | grep -q '"name":"gen","since_unix_ms":[0-9]*,"state":"stopped"\|"name": *"gen"[^}]*"state": *"stopped"'; do
  sleep 0.2
done
base=$(count)
perf_pid=
if [ -n "${WEIR_BENCH_PERF:-}" ]; then
  perf record -q -g -F 1999 -p "$pid" -o "$WEIR_BENCH_PERF" 2>/dev/null &
  perf_pid=$!
  sleep 0.5
fi
c0=$(cpu); e0=$(epcpu); i0=$(idle); t0=$(date +%s.%N)
curl -fsS -X POST "http://127.0.0.1:$ep/release" >/dev/null
# One request that the endpoint answers when the backlog has arrived: polling would
# take CPU from what is measured.
curl -fsS --max-time 600 "http://127.0.0.1:$ep/wait/$((base + backlog))" >/dev/null
c1=$(cpu); e1=$(epcpu); i1=$(idle); t1=$(date +%s.%N)
if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
drain_hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
stop

# live: the whole pipeline.
config live "rate = 0"
start live
sleep 2 # warm up
n0=$(count); l0=$(cpu); u0=$(date +%s.%N)
sleep "$secs"
n1=$(count); l1=$(cpu); u1=$(date +%s.%N)
live_hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
stop

be0=$(epcpu); bn0=$(count)
read -r bare bare_ticks < <("$target/examples/http_sink_bench" client "http://127.0.0.1:$ep/ingest" "$secs" "$conc" "$batch" 200)
be1=$(epcpu); bn1=$(count)
read -r encoding _ < <("$target/examples/http_sink_bench" client-encode "http://127.0.0.1:$ep/ingest" "$secs" "$conc" "$batch" 200)
echo "http sink bench, $(nproc) cores, $(date -u +%FT%TZ), concurrency $conc, $batch records of 200 B per request"
# The report, and after it one line of the same figures for the markdown tables (MD …).
awk -v b="$backlog" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v dh="$drain_hwm" \
    -v n="$((n1 - n0))" -v l="$((l1 - l0))" -v u0="$u0" -v u1="$u1" -v lh="$live_hwm" \
    -v hz="$hz" -v bare="$bare" -v enc="$encoding" -v cores="$(nproc)" \
    -v e0="$e0" -v e1="$e1" -v i0="$i0" -v i1="$i1" -v bt="$bare_ticks" \
    -v be="$((be1 - be0))" -v bn="$((bn1 - bn0))" 'BEGIN {
  dt = t1 - t0; drain = b / dt; dc = (c1 - c0) / hz
  printf "drain of %d records: %.2f s, %.0f records/s, CPU %.0f%% (%.2f µs per record), peak RSS %.1f MiB\n",
    b, dt, drain, 100 * dc / dt, dc / b * 1e6, dh / 1024
  # What the CPU allows: the endpoint shares the cores, so weir at w µs per record and
  # the endpoint at e µs per record cannot pass cores / (w + e) records/s together.
  w = dc / b * 1e6; ed = (e1 - e0) / hz / b * 1e6
  eb = (bn > 0 ? be / hz / bn * 1e6 : 0); cb = (bn > 0 ? bt / hz / bn * 1e6 : 0)
  printf "  over the drain: endpoint %.2f µs per record, machine idle %.0f%%\n",
    ed, 100 * (i1 - i0) / hz / dt / cores
  printf "  bare client: %.3f µs of its own CPU per record, the endpoint %.2f µs\n", cb, eb
  if (w + eb > 0 && bare > 0) {
    ceil = cores / ((w + eb) * 1e-6)
    printf "  CPU ceiling at weir'"'"'s µs per record: %.0f records/s = %.2f × bare; 0.8 × bare needs weir at %.3f µs per record\n",
      ceil, ceil / bare, cores / (0.8 * bare * 1e-6) - eb
  }
  lt = u1 - u0; live = n / lt; lc = l / hz
  printf "live pipeline:    %.0f records/s, CPU %.0f%% (%.2f µs per record), peak RSS %.1f MiB\n",
    live, 100 * lc / lt, (n > 0 ? lc / n * 1e6 : 0), lh / 1024
  printf "bare client:      %.0f records/s (one pre-built body)\n", bare
  printf "encoding client:  %.0f records/s (each body encoded from the records)\n", enc
  printf "drain / bare = %.2f   drain / encoding = %.2f   live / bare = %.2f   live / encoding = %.2f\n",
    (bare > 0 ? drain / bare : 0), (enc > 0 ? drain / enc : 0), (bare > 0 ? live / bare : 0), (enc > 0 ? live / enc : 0)
  printf "MD %.0f %.0f %.2f %.1f %.0f %.0f %.2f %.1f %.0f %.0f %.2f %.2f %.2f %.2f %.2f %.3f %.2f %.0f\n",
    drain, 100 * dc / dt, w, dh / 1024, live, 100 * lc / lt, (n > 0 ? lc / n * 1e6 : 0), lh / 1024, bare, enc,
    (bare > 0 ? drain / bare : 0), (enc > 0 ? drain / enc : 0), (bare > 0 ? live / bare : 0), (enc > 0 ? live / enc : 0),
    ed, cb, eb, 100 * (i1 - i0) / hz / dt / cores
}' >"$work/report"
grep -v '^MD ' "$work/report"
if [ "$markdown" = 1 ]; then
  read -r _ drain dcpu dus drss live lcpu lus lrss bare_rps enc_rps r1 r2 r3 r4 ed cb eb idle_pct < <(grep '^MD ' "$work/report")
  md_intro
  md "$(printf '%s records of 200 B, %s per request, concurrency %s, %s s live.' "$backlog" "$batch" "$conc" "$secs")" ""
  md_row "" "records/s" "weir CPU" "weir µs CPU/record" "peak RSS"
  md_row "---" "---:" "---:" "---:" "---:"
  md_row "drain of a WAL backlog (the sink's own rate)" "$drain" "$dcpu%" "$dus" "$drss MiB"
  md_row "live: generator → WAL → sink" "$live" "$lcpu%" "$lus" "$lrss MiB"
  md_row "bare client, one pre-built body" "$bare_rps" "" "" ""
  md_row "encoding client, each body encoded" "$enc_rps" "" "" ""
  md ""
  md_row "drain ÷ bare" "drain ÷ encoding" "live ÷ bare" "live ÷ encoding" "endpoint µs/record (drain)" "bare client µs/record" "endpoint µs/record (bare)" "machine idle (drain)"
  md_row "---:" "---:" "---:" "---:" "---:" "---:" "---:" "---:"
  md_row "$r1" "$r2" "$r3" "$r4" "$ed" "$cb" "$eb" "$idle_pct%"
fi

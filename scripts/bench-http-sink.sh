#!/usr/bin/env bash
# HTTP sink benchmark (not a test, not in CI): records/s that weir's `http` sink delivers
# into a fast local endpoint, next to a bare client posting the same batches at the
# same concurrency, with weir's CPU per record and peak RSS.
#
#   ./scripts/bench-http-sink.sh [SECONDS] [CONCURRENCY] [BATCH_RECORDS]   # 20 s, 8, 500
#
# weir: generator (rate 0, 200 B payloads) → WAL (sync = "always" per batch) → http sink
# (ndjson, no compression, min = max concurrency = CONCURRENCY) → the endpoint of
# `cargo run --release --example http_sink_bench -- serve`, which answers 200 and counts
# lines. The bare client (`… -- client`) posts pre-built bodies of the same envelopes
# from CONCURRENCY tasks over hyper-util's pooled client, the one the sink uses. The
# endpoint and the client share the machine's cores with weir.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}" conc="${2:-8}" batch="${3:-500}"
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
cat >"$work/weir.toml" <<CONF
[runtime]
data_dir = "$work/data"
status_addr = "127.0.0.1:$port"
shutdown_timeout = "2s"
[wal]
max_disk = "256 MiB"
segment_bytes = "64 MiB"
on_full = "block"
[sources.gen]
type = "generator"
rate = 0
size = 200
[sinks.api]
type = "http"
inputs = ["gen"]
url = "http://127.0.0.1:$ep/ingest"
batch_records = $batch
batch_bytes = "16 MiB"
min_concurrency = $conc
max_concurrency = $conc
CONF
"$target/weir" run "$work/weir.toml" 2>"$work/weir.log" &
pid=$!
for _ in $(seq 50); do curl -fsS "http://127.0.0.1:$port/status" >/dev/null 2>&1 && break; sleep 0.1; done
sleep 2 # warm up
n0=$(count); c0=$(awk '{print $14 + $15}' "/proc/$pid/stat"); t0=$(date +%s.%N)
sleep "$secs"
n1=$(count); c1=$(awk '{print $14 + $15}' "/proc/$pid/stat"); t1=$(date +%s.%N)
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
kill -TERM "$pid"; wait "$pid" || true; pid=
bare=$("$target/examples/http_sink_bench" client "http://127.0.0.1:$ep/ingest" "$secs" "$conc" "$batch" 200)
echo "http sink bench, $(nproc) cores, $(date -u +%FT%TZ), ${secs} s, concurrency $conc, $batch records of 200 B per request"
awk -v n="$((n1 - n0))" -v c="$((c1 - c0))" -v hz="$hz" -v t0="$t0" -v t1="$t1" -v hwm="$hwm" -v bare="$bare" 'BEGIN {
  dt = t1 - t0; rps = n / dt
  printf "weir http sink: %.0f records/s, CPU %.0f%% (%.2f µs per record), peak RSS %.1f MiB\n",
    rps, 100 * c / hz / dt, (n > 0 ? c / hz / n * 1e6 : 0), hwm / 1024
  printf "bare client:    %.0f records/s;  weir / bare = %.2f\n", bare, (bare > 0 ? rps / bare : 0)
}'

#!/usr/bin/env bash
# Pipeline benchmark (not a test): runs the release `weir` binary and reports records/s,
# MB/s, CPU and peak RSS, from /metrics and /proc.
#
#   ./scripts/bench-pipeline.sh [SECONDS]        # default 20 s per case
#
# Cases:
#   max      generator (rate 0: as fast as the WAL admits) → WAL → blackhole
#   overload generator at max rate → WAL → blackhole limited to 2,000 records/s for
#            60 s (on_full = block, a 64 MiB budget): the 10× overload case. Peak RSS is
#            compared with `weir validate`'s memory estimate.
# The raw WAL baseline is `cargo bench -p weir-wal --bench append`.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
cargo build --release -q -p weir
bin="${CARGO_TARGET_DIR:-target}/release/weir"
work="$(mktemp -d)"
trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
port=19464

metric() { # NAME → its value (summed over labels) from /metrics
  curl -fsS "http://127.0.0.1:$port/metrics" | awk -v n="$1" '$1 ~ "^"n"({|$)" {s += $2} END {printf "%.0f", s}'
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hwm_kib() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }

run_case() { # NAME SECONDS CONFIG-BODY
  local name="$1" duration="$2" body="$3" conf="$work/$1.toml"
  rm -rf "$work/data"
  cat >"$conf" <<CONF
[runtime]
data_dir = "$work/data"
memory_target = "256 MiB"
status_addr = "127.0.0.1:$port"
shutdown_timeout = "2s"
$body
CONF
  local estimate
  estimate=$("$bin" validate "$conf" | awk '/^memory estimate/ {gsub(/[(]/, "", $5); print $5}')
  "$bin" run "$conf" 2>"$work/$name.log" &
  pid=$!
  for _ in $(seq 50); do curl -fsS "http://127.0.0.1:$port/status" >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 1 # warm up
  local r0 b0 c0 t0 r1 b1 c1 t1
  r0=$(metric weir_sink_records_total); b0=$(metric weir_source_bytes_total); c0=$(cpu_ticks "$pid"); t0=$(date +%s.%N)
  sleep "$duration"
  r1=$(metric weir_sink_records_total); b1=$(metric weir_source_bytes_total); c1=$(cpu_ticks "$pid"); t1=$(date +%s.%N)
  local hwm; hwm=$(hwm_kib "$pid")
  kill -TERM "$pid"; wait "$pid" || true; pid=
  local hz; hz=$(getconf CLK_TCK)
  awk -v n="$name" -v r="$((r1 - r0))" -v b="$((b1 - b0))" -v c="$((c1 - c0))" -v hz="$hz" \
      -v t0="$t0" -v t1="$t1" -v hwm="$hwm" -v est="$estimate" 'BEGIN {
    dt = t1 - t0
    printf "%-9s %12.0f records/s out  %8.1f MB/s into the WAL  CPU %5.0f%%  peak RSS %6.1f MiB  (validate estimate %.1f MiB; RSS - estimate = %.1f MiB)\n",
      n, r / dt, b / dt / 1e6, 100 * c / hz / dt, hwm / 1024, est / 1048576, hwm / 1024 - est / 1048576
  }'
}

echo "weir pipeline bench, $(nproc) cores, $(date -u +%FT%TZ)"
run_case max "$secs" '
[wal]
max_disk = "256 MiB"
on_full = "block"
[sources.gen]
type = "generator"
rate = 0
size = 200
[sinks.hole]
type = "blackhole"
inputs = ["gen"]'
run_case overload 60 '
[wal]
max_disk = "64 MiB"
segment_bytes = "4 MiB"
on_full = "block"
[sources.gen]
type = "generator"
rate = 0
size = 200
[sinks.hole]
type = "blackhole"
inputs = ["gen"]
rate = 2000'

#!/usr/bin/env bash
# Pipeline benchmark (not a test, not in CI): runs the release `weir` binary and reports
# records/s, MB/s, CPU and peak RSS (from /metrics and /proc), next to two baselines
# measured in the same run.
#
#   ./scripts/bench-pipeline.sh [--markdown] [SECONDS]   # default 20 s per case; ~3 min in all
#       # --markdown: the tables for docs/benchmarks.md on stdout (the usual report on stderr)
#
# Cases (each a fresh data_dir; the WAL syncs every batch, sync = "always"):
#   max       generator (rate 0: as fast as the WAL admits) → WAL → blackhole. WAL budget
#             256 MiB with on_full = "block": once the sink lags that far, the source is
#             held to the sink's pace, so "in" is a mix of both and "out" is the pipeline's
#             end-to-end rate.
#   overload  generator at max rate → WAL → blackhole limited to 2,000 records/s, for 60 s
#             (WEIR_BENCH_OVERLOAD_SECS)
#             (on_full = "block", a 64 MiB budget): the 10× overload case. Peak RSS is
#             compared with `weir validate`'s memory estimate.
#   http      an `http` source → WAL → blackhole, driven by `wrk` from a second process
#             (installed with apt-get when missing): 1 thread, WEIR_BENCH_HTTP_CONNECTIONS
#             connections (default 16, the source's max_concurrent_requests), each POSTing
#             an NDJSON body of 100 records of 100 B and waiting for the answer (200 once
#             durable, 503 when admission fails within 100 ms). wrk shares the 2 cores.
#             Its timeout is 30 s: wrk leaves timed-out requests out of its latencies, so
#             slow answers are measured rather than hidden.
# Baselines:
#   no-WAL    `cargo bench -p weir --bench no_wal`: the generator's record making and the
#             sink driver's decoding and blackhole counting in-process, the WAL replaced by
#             a channel (no write, fsync, segment read or cursor commit). See its header.
#   raw WAL   `cargo bench -p weir-wal --bench append` (WEIR_BENCH_SECS per case, default
#             3): appends of fixed-size records with group commit, no source or sink. Its
#             100 B and 1 KiB rows (8 appenders) bracket the pipeline's records (200 B of
#             payload, ~245 B framed in the WAL).
# Ratios printed at the end: pipeline out / no-WAL = what the WAL (write, fsync, read
# back, cursor commits) costs end to end; pipeline in / raw WAL = how close the source
# side gets to what the WAL alone appends.
#
# WEIR_BIN=PATH runs that binary instead of building this tree's (scripts/bench-compare.sh
# uses it to alternate two builds); WEIR_BENCH_CASES="max http" runs only those cases;
# WEIR_BENCH_BASELINES=0 skips the baselines and ratios.
set -euo pipefail
. "$(dirname "$0")/bench-markdown.sh" "$@"
set -- "${bench_args[@]+"${bench_args[@]}"}"
cd "$(dirname "$0")/.."
secs="${1:-20}"
connections="${WEIR_BENCH_HTTP_CONNECTIONS:-16}"
overload_secs="${WEIR_BENCH_OVERLOAD_SECS:-60}"
cases="${WEIR_BENCH_CASES:-max overload http}"
baselines="${WEIR_BENCH_BASELINES:-1}"
command -v wrk >/dev/null || apt-get install -y wrk >/dev/null
if [ -n "${WEIR_BIN:-}" ]; then
  bin="$WEIR_BIN"
else
  cargo build --release -q -p weir
  bin="${CARGO_TARGET_DIR:-target}/release/weir"
fi
if [ "$baselines" = 1 ]; then
  no_wal=$(cargo bench -q --no-run -p weir --bench no_wal --message-format=json |
    sed -n 's/.*"executable":"\([^"]*no_wal[^"]*\)".*/\1/p' | tail -1)
fi
wants() { [[ " $cases " == *" $1 "* ]]; }
work="$(mktemp -d)"
pid=
# (`kill 0` would signal the whole process group: only kill a pid that is set.)
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
port=19464
http_port=19465
hz=$(getconf CLK_TCK)

metric() { # NAME → its value (summed over labels) from /metrics
  curl -fsS "http://127.0.0.1:$port/metrics" | awk -v n="$1" '$1 ~ "^"n"({|$)" {s += $2} END {printf "%.0f", s}'
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hwm_kib() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
# Runs a command; its user + system CPU seconds go to $work/cpu.
cpu_of() {
  local TIMEFORMAT='%U %S'
  { time "$@" 2>"$work/stderr"; } 2>"$work/time"
  tail -1 "$work/time" >"$work/cpu"
}


# run_case NAME SECONDS CONFIG-BODY [LOAD-COMMAND…]: starts weir, warms up 1 s (unless a
# load command drives it), then measures for SECONDS (or while the load command runs).
# Sets the globals in_rps, out_rps, in_mbs.
run_case() {
  local name="$1" duration="$2" body="$3" conf="$work/$1.toml"
  shift 3
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
  [ $# -gt 0 ] || sleep 1 # warm up
  local ri0 ro0 b0 c0 t0 ri1 ro1 b1 c1 t1
  ri0=$(metric weir_source_records_total); ro0=$(metric weir_sink_records_total)
  b0=$(metric weir_source_bytes_total); c0=$(cpu_ticks "$pid"); t0=$(date +%s.%N)
  if [ $# -gt 0 ]; then "$@"; else sleep "$duration"; fi
  ri1=$(metric weir_source_records_total); ro1=$(metric weir_sink_records_total)
  b1=$(metric weir_source_bytes_total); c1=$(cpu_ticks "$pid"); t1=$(date +%s.%N)
  local hwm; hwm=$(hwm_kib "$pid")
  kill -TERM "$pid"; wait "$pid" || true; pid=
  read -r in_rps out_rps in_mbs < <(awk -v ri="$((ri1 - ri0))" -v ro="$((ro1 - ro0))" -v b="$((b1 - b0))" \
    -v t0="$t0" -v t1="$t1" 'BEGIN {dt = t1 - t0; printf "%.0f %.0f %.1f\n", ri / dt, ro / dt, b / dt / 1e6}')
  awk -v n="$name" -v ri="$((ri1 - ri0))" -v ro="$((ro1 - ro0))" -v b="$((b1 - b0))" -v c="$((c1 - c0))" \
      -v hz="$hz" -v t0="$t0" -v t1="$t1" -v hwm="$hwm" -v est="$estimate" -v md="$work/md-rows" 'BEGIN {
    dt = t1 - t0
    printf "%-9s %12.0f %12.0f %9.1f %9.1f %5.0f%% %6.1f MiB %6.1f MiB %8.1f MiB\n",
      n, ri / dt, ro / dt, b / dt / 1e6, (ri > 0 ? b / ri : 0) * ro / dt / 1e6, 100 * c / hz / dt,
      hwm / 1024, est / 1048576, hwm / 1024 - est / 1048576
    printf "| %s | %.0f | %.0f | %.1f | %.1f | %.0f%% | %.1f MiB | %.1f MiB |\n",
      n, ri / dt, ro / dt, b / dt / 1e6, (ri > 0 ? b / ri : 0) * ro / dt / 1e6, 100 * c / hz / dt,
      hwm / 1024, est / 1048576 >> md
  }'
}

generator_body() { # WAL-BUDGET SEGMENT BLACKHOLE-RATE-LINE
  cat <<CONF
[wal]
max_disk = "$1"
segment_bytes = "$2"
on_full = "block"
[sources.gen]
type = "generator"
rate = 0
size = 200
[sinks.hole]
type = "blackhole"
inputs = ["gen"]
$3
CONF
}

echo "weir pipeline bench, $(nproc) cores, $(date -u +%FT%TZ), ${secs} s per case (overload ${overload_secs} s)"
echo "MB/s = WAL-framed bytes (record + frame header); out = records out × framed size; CPU = weir's, 100% = one core"
printf '%-9s %12s %12s %9s %9s %6s %10s %10s %12s\n' case "records/s in" "records/s out" "MB/s in" "MB/s out" CPU "peak RSS" estimate "RSS-estimate"
if wants max; then
  run_case max "$secs" "$(generator_body "256 MiB" "64 MiB" "")"
  max_in_rps=$in_rps max_out_rps=$out_rps max_in_mbs=$in_mbs
fi
if wants overload; then
  run_case overload "$overload_secs" "$(generator_body "64 MiB" "4 MiB" "rate = 2000")"
fi

# The HTTP load: wrk POSTs the same body on every connection and counts answers by
# status in its response hook (one Lua state per thread; done() sums them).
cat >"$work/post.lua" <<'LUA'
local records, size = 100, 100
local lines = {}
for i = 1, records do
  local head = string.format('{"seq":%d,"pad":"', i)
  lines[i] = head .. string.rep("x", size - #head - 2) .. '"}'
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-ndjson"
wrk.body = table.concat(lines, "\n") .. "\n"

local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) ok, busy, other = 0, 0, 0 end
function response(status, headers, body)
  if status == 200 then ok = ok + 1 elseif status == 503 then busy = busy + 1 else other = other + 1 end
end
function done(summary, latency, requests)
  local o, b, x = 0, 0, 0
  for _, t in ipairs(threads) do
    o = o + t:get("ok"); b = b + t:get("busy"); x = x + t:get("other")
  end
  local e = summary.errors
  io.write(string.format("WRK %d %d %d %d %d %d %.1f %.1f %.1f %d %d %d %d %d %.1f\n", summary.requests, o, b, x,
    e.connect + e.read + e.write + e.timeout, summary.duration,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000, #wrk.body,
    e.connect, e.read, e.write, e.timeout, latency:percentile(90) / 1000))
end
LUA
load_http() {
  cpu_of wrk -t1 -c"$connections" -d"${secs}s" --timeout 30s -s "$work/post.lua" "http://127.0.0.1:$http_port/ingest" >"$work/wrk.out"
}
if wants http; then
run_case http "$secs" "
[wal]
max_disk = \"256 MiB\"
segment_bytes = \"64 MiB\"
on_full = \"block\"
[sources.web]
type = \"http\"
listen = \"127.0.0.1:$http_port\"
[sinks.hole]
type = \"blackhole\"
inputs = [\"web\"]" load_http
http_in_mbs=$in_mbs
read -r wrk_cpu_user wrk_cpu_sys <"$work/cpu"
awk -v u="$wrk_cpu_user" -v s="$wrk_cpu_sys" -v c="$connections" '$1 == "WRK" {
  dt = $7 / 1e6
  printf "  wrk, %d connections: %.0f requests/s (%d: 200 %d, 503 %d, other %d), body %d B = %.1f MB/s of 200s;\n",
    c, $2 / dt, $2, $3, $4, $5, $11, $3 * $11 / dt / 1e6
  printf "  socket errors %d (connect %d, read %d, write %d, timeout %d);", $6, $12, $13, $14, $15
  printf " latency p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms; wrk CPU %.0f%%\n",
    $8, $16, $9, $10, 100 * (u + s) / dt
  printf "| %d | %.0f | %d | %d | %d | %d | %.1f ms | %.1f ms | %.1f ms |\n",
    c, $2 / dt, $3, $4, $5, $6, $8, $9, $10 > md
}' md="$work/md-wrk" "$work/wrk.out"
fi

if [ "$markdown" = 1 ]; then
  md_intro
  md "Each case ${secs} s (overload ${overload_secs} s); MB/s are WAL-framed bytes; CPU is weir's, 100% = one core." ""
  md_row case "records/s in" "records/s out" "MB/s in" "MB/s out" "weir CPU" "peak RSS" "validate estimate"
  md_row --- ---: ---: ---: ---: ---: ---: ---:
  md "$(cat "$work/md-rows" 2>/dev/null)"
  if [ -s "$work/md-wrk" ]; then
    md "" "The http case's load (wrk, 100 records of 100 B per request):" ""
    md_row connections "requests/s" "200" "503" other "socket errors" "p50" "p99" max
    md_row ---: ---: ---: ---: ---: ---: ---: ---: ---:
    md "$(cat "$work/md-wrk")"
  fi
fi

[ "$baselines" = 1 ] && wants max && wants http || exit 0
echo
echo "baselines, same machine, same run:"
cpu_of env WEIR_BENCH_SECS="$secs" "$no_wal" >"$work/no_wal.out"
read -r nw_cpu_user nw_cpu_sys <"$work/cpu"
nw_rps=$(awk '{print $2}' "$work/no_wal.out")
awk -v u="$nw_cpu_user" -v s="$nw_cpu_sys" -v secs="$secs" '{
  printf "no-WAL    %12.0f records/s  %9.1f MB/s framed  CPU %3.0f%%  (generator → channel → decode → blackhole, in-process)\n",
    $2, $4, 100 * (u + s) / secs
}' "$work/no_wal.out"
cargo bench -q -p weir-wal --bench append >"$work/append.out" 2>"$work/append.err"
read -r raw100_rps raw100_mbs < <(awk '$1 == 100 && $2 == 8 {print $3, $4}' "$work/append.out")
read -r raw1k_rps raw1k_mbs < <(awk '$1 == 1024 && $2 == 8 {print $3, $4}' "$work/append.out")
printf 'raw WAL   %12.0f records/s  %9.1f MB/s framed  (100 B records, 8 appenders, sync = always)\n' "$raw100_rps" "$raw100_mbs"
printf 'raw WAL   %12.0f records/s  %9.1f MB/s framed  (1 KiB records, 8 appenders, sync = always)\n' "$raw1k_rps" "$raw1k_mbs"

echo
awk -v o="$max_out_rps" -v i="$max_in_rps" -v m="$max_in_mbs" -v h="$http_in_mbs" -v nw="$nw_rps" \
    -v r1="$raw100_rps" -v b1="$raw100_mbs" -v b2="$raw1k_mbs" 'BEGIN {
  printf "ratios: max  out / no-WAL records/s            = %.3f  (what the WAL costs end to end)\n", o / nw
  printf "        max  in / raw WAL, 100 B: records/s %.2f, MB/s %.2f; 1 KiB: MB/s %.2f  (source side vs appends alone)\n",
    i / r1, m / b1, m / b2
  printf "        http in / raw WAL MB/s, 100 B          = %.2f\n", h / b1
}'
md "" "Baselines in the same run:" ""
md_row baseline "records/s" "MB/s framed" "the pipeline against it"
md_row --- ---: ---: ---
md_row "no-WAL (generator → channel → decode → blackhole, in-process)" "$nw_rps" \
  "$(awk '{printf "%.1f", $4}' "$work/no_wal.out")" \
  "$(awk -v o="$max_out_rps" -v nw="$nw_rps" 'BEGIN {printf "max out ÷ no-WAL = %.2f", o / nw}')"
md_row "raw WAL appends, 100 B, 8 appenders" "$raw100_rps" "$raw100_mbs" \
  "$(awk -v i="$max_in_rps" -v r="$raw100_rps" -v h="$http_in_mbs" -v b="$raw100_mbs" 'BEGIN {printf "max in ÷ raw = %.2f; http in ÷ raw MB/s = %.2f", i / r, h / b}')"
md_row "raw WAL appends, 1 KiB, 8 appenders" "$raw1k_rps" "$raw1k_mbs" \
  "$(awk -v m="$max_in_mbs" -v b="$raw1k_mbs" 'BEGIN {printf "max in ÷ raw MB/s = %.2f", m / b}')"

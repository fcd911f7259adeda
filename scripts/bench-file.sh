#!/usr/bin/env bash
# File source benchmark (not a test, not in CI): the release `weir` binary reads a file
# of 200-byte lines into the WAL (fsync every batch) and a blackhole, next to the
# generator making the same number of 200-byte records into the same WAL and blackhole,
# alternating the two cases in one sitting.
#
#   ./scripts/bench-file.sh [--markdown] [MIB] [RUNS]   # default 1024 MiB, 3 runs of each
#       # --markdown: the table for docs/benchmarks.md on stdout (the usual report on stderr)
#
# Each run starts weir on a fresh data_dir and times it from its start until its sink
# has every record (the file was written before, and is in the page cache). Printed per
# case: the median records/s and MB/s of lines (or payloads), weir's CPU per record, and
# for the file case the tailer thread's own CPU per record (`weir-source-tail`: finding
# lines, parsing, encoding), then file ÷ generator.
#
# WEIR_BIN=PATH runs that binary instead of building this tree's.
set -euo pipefail
. "$(dirname "$0")/bench-markdown.sh" "$@"
set -- "${bench_args[@]+"${bench_args[@]}"}"
cd "$(dirname "$0")/.."
mib="${1:-1024}"
runs="${2:-3}"
if [ -n "${WEIR_BIN:-}" ]; then
  bin="$WEIR_BIN"
else
  cargo build --release -q -p weir
  bin="${CARGO_TARGET_DIR:-target}/release/weir"
fi
work="$(mktemp -d)"
pid=
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
port=19474
hz=$(getconf CLK_TCK)

# The input: 200-byte JSON lines (199 bytes and a newline), numbered, to MIB MiB.
python3 - "$work/input.log" "$mib" <<'PY'
import sys
path, mib = sys.argv[1], int(sys.argv[2])
with open(path, "w") as f:
    n, block = 0, []
    total = mib * 1024 * 1024
    written = 0
    while written < total:
        head = '{"n":%d,"pad":"' % n
        line = head + "x" * (199 - len(head) - 2) + '"}\n'
        block.append(line)
        n += 1
        written += len(line)
        if len(block) == 4096:
            f.write("".join(block))
            block = []
    f.write("".join(block))
PY
records=$(wc -l <"$work/input.log")
echo "weir file source bench, $(nproc) cores, $(date -u +%FT%TZ): $records lines of 200 B ($mib MiB), $runs runs of each case"

metric() { # NAME → its value (summed over labels) from /metrics
  curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null | awk -v n="$1" '$1 ~ "^"n"({|$)" {s += $2} END {printf "%.0f", s}'
}
cpu_ticks() { awk '{print $14 + $15}' "$1"; }

# run_case NAME SOURCE-BODY: prints "seconds weir-cpu-ticks tailer-cpu-ticks".
run_case() {
  local name="$1" body="$2" conf="$work/$1.toml"
  rm -rf "$work/data"
  cat >"$conf" <<CONF
[runtime]
data_dir = "$work/data"
status_addr = "127.0.0.1:$port"
shutdown_timeout = "2s"
[wal]
max_disk = "4 GiB"
segment_bytes = "64 MiB"
on_full = "block"
$body
[sinks.hole]
type = "blackhole"
inputs = ["src"]
CONF
  local t0 t1 done=0 tid="" tail_ticks=0
  t0=$(date +%s.%N)
  "$bin" run "$conf" >/dev/null 2>"$work/$name.log" &
  pid=$!
  while :; do
    local out
    out=$(metric weir_sink_records_total || true) # nothing until /metrics answers
    if [ -n "$out" ] && [ "$out" -ge "$records" ]; then break; fi
    if [ -z "$tid" ]; then
      tid=$(grep -l '^weir-source-src$' /proc/"$pid"/task/*/comm 2>/dev/null | head -1 | xargs -r dirname || true)
    fi
    if [ -n "$tid" ] && [ -r "$tid/stat" ]; then tail_ticks=$(cpu_ticks "$tid/stat"); fi
    kill -0 "$pid" 2>/dev/null || { echo "weir exited:"; cat "$work/$name.log"; exit 1; }
    sleep 0.02
  done
  t1=$(date +%s.%N)
  done=$(cpu_ticks "/proc/$pid/stat")
  kill -TERM "$pid"; wait "$pid" || true; pid=
  awk -v t0="$t0" -v t1="$t1" -v c="$done" -v tc="$tail_ticks" 'BEGIN {printf "%.3f %d %d\n", t1 - t0, c, tc}'
}

file_body="[sources.src]
type = \"file\"
path = \"$work/input.log\""
gen_body="[sources.src]
type = \"generator\"
rate = 0
count = $records
size = 200"

: >"$work/file.txt"
: >"$work/gen.txt"
for i in $(seq "$runs"); do
  run_case file "$file_body" | tee -a "$work/file.txt" | awk -v i="$i" '{printf "run %d  file      %6.2f s\n", i, $1}'
  run_case gen "$gen_body" | tee -a "$work/gen.txt" | awk -v i="$i" '{printf "run %d  generator %6.2f s\n", i, $1}'
done

# median of column 1 (seconds), with that run's CPU columns
median() { sort -n "$1" | awk '{a[NR] = $0} END {print a[int((NR + 1) / 2)]}'; }
read -r fs fc ft < <(median "$work/file.txt")
read -r gs gc _ < <(median "$work/gen.txt")
report=$(awk -v n="$records" -v fs="$fs" -v fc="$fc" -v ft="$ft" -v gs="$gs" -v gc="$gc" -v hz="$hz" 'BEGIN {
  fr = n / fs; gr = n / gs
  printf "%-10s %12.0f rec/s %8.1f MB/s  weir CPU %6.2f us/rec  tailer CPU %6.2f us/rec\n", "file", fr, fr * 200 / 1e6, fc / hz / n * 1e6, ft / hz / n * 1e6
  printf "%-10s %12.0f rec/s %8.1f MB/s  weir CPU %6.2f us/rec\n", "generator", gr, gr * 200 / 1e6, gc / hz / n * 1e6
  printf "file / generator: %.2f\n", fr / gr
  printf "MD | %d MiB | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |\n", n * 200 / 1048576, fr, gr, fr / gr, fc / hz / n * 1e6, ft / hz / n * 1e6, gc / hz / n * 1e6
}')
echo "medians of $runs runs:"
grep -v '^MD ' <<<"$report"
md_intro
md "| input | file rec/s | generator rec/s | file ÷ generator | weir CPU, file (µs/rec) | tailer thread CPU (µs/rec) | weir CPU, generator (µs/rec) |" \
   "|---|---|---|---|---|---|---|"
md "$(sed -n 's/^MD //p' <<<"$report")"

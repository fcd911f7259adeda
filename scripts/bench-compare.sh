#!/usr/bin/env bash
# Compares two release builds of weir on the pipeline bench (not a test, not in CI):
# runs scripts/bench-pipeline.sh's `max` and `http` cases RUNS times for each binary,
# alternating A and B in one sitting so that the machine's load hits both alike, and
# prints each run, the medians and B / A.
#
#   ./scripts/bench-compare.sh [--markdown] A_BIN B_BIN [RUNS] [SECONDS]
#       # defaults: 6 runs, 10 s; --markdown: the medians as a table on stdout (the
#       # usual report on stderr)
#
# Build the old one from a worktree, e.g.
#   git worktree add ../weir-old REV && (cd ../weir-old && cargo build --release -p weir)
set -euo pipefail
. "$(dirname "$0")/bench-markdown.sh" "$@"
set -- "${bench_args[@]+"${bench_args[@]}"}"
cd "$(dirname "$0")/.."
a="$1" b="$2" runs="${3:-6}" secs="${4:-10}"
out="$(mktemp)"
trap 'rm -f "$out" "$out.medians"' EXIT
echo "bench-compare: A = $a, B = $b, $runs runs each, ${secs} s per case, $(nproc) cores, $(date -u +%FT%TZ)"
for i in $(seq "$runs"); do
  for side in A B; do
    bin="$a"; [ "$side" = B ] && bin="$b"
    WEIR_BIN="$bin" WEIR_BENCH_CASES="max http" WEIR_BENCH_BASELINES=0 \
      scripts/bench-pipeline.sh "$secs" |
      awk -v s="$side" -v i="$i" '$1 == "max" || $1 == "http" {print s, i, $1, $2, $3, $6, $7}' |
      tee -a "$out"
  done
done
echo "(columns: side, run, case, records/s in, records/s out, weir CPU, peak RSS MiB); medians:"
# The medians, and the same figures as markdown rows (MD …).
awk '
  { key = $1 " " $3; n[key]++; vin[key, n[key]] = $4; vout[key, n[key]] = $5 }
  function median(arr, key, count,   i, j, t, v) {
    for (i = 1; i <= count; i++) v[i] = arr[key, i]
    for (i = 1; i <= count; i++) for (j = i + 1; j <= count; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return count % 2 ? v[(count + 1) / 2] : (v[count / 2] + v[count / 2 + 1]) / 2
  }
  END {
    for (c = 1; c <= 2; c++) {
      name = c == 1 ? "max" : "http"
      ai = median(vin, "A " name, n["A " name]); bi = median(vin, "B " name, n["B " name])
      ao = median(vout, "A " name, n["A " name]); bo = median(vout, "B " name, n["B " name])
      printf "%-5s in: A %.0f, B %.0f, B/A %.3f;  out: A %.0f, B %.0f, B/A %.3f\n", name, ai, bi, bi / ai, ao, bo, bo / ao
      printf "MD | %s | %.0f | %.0f | %.3f | %.0f | %.0f | %.3f |\n", name, ai, bi, bi / ai, ao, bo, bo / ao
    }
  }' "$out" >"$out.medians"
grep -v '^MD ' "$out.medians"
md_intro
md "A = \`$a\`, B = \`$b\`; medians of $runs alternating runs of ${secs} s per case." ""
md_row case "A records/s in" "B records/s in" "B / A in" "A records/s out" "B records/s out" "B / A out"
md_row --- ---: ---: ---: ---: ---: ---:
md "$(sed -n 's/^MD //p' "$out.medians")"

#!/usr/bin/env bash
# The soak run: long versions of the kill -9, overload, fault-injection and fuzz tests,
# then one summary table. `./scripts/test.sh` runs it after the suite when WEIR_SOAK=1;
# it can also run alone (after a build). About 25 minutes on 2 cores.
#
#   WEIR_SOAK_CYCLES   kill -9 cycles of HTTP -> WAL -> file (default 1000)
#   WEIR_SOAK_SECS     seconds of 10x overload per on_full policy (default 60)
#   WEIR_SOAK_CASES    proptest cases of the WAL's model and fault tests (default 1000)
#   WEIR_FUZZ_SECS     seconds per fuzz target (default 120)
#   WEIR_SEED          replays the kill -9 cycles of an earlier run
set -euo pipefail
cd "$(dirname "$0")/.."
export WEIR_SOAK=1
cases="${WEIR_SOAK_CASES:-1000}"
fuzz_secs="${WEIR_FUZZ_SECS:-120}"
out="${CARGO_TARGET_DIR:-target}/soak-logs"
rm -rf "$out"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rows=()
row() { rows+=("$(printf '| %s | %s | %s |' "$1" "$2" "$3")"); }
timed() { # name, log file, command...
  local name="$1" log="$2" start rc
  shift 2
  start=$(date +%s)
  set +e
  "$@" >"$log" 2>&1
  rc=$?
  set -e
  echo "$name: exit $rc after $(($(date +%s) - start)) s (log: $log)" >&2
  return $rc
}
failed=0

echo "== kill -9 cycles and 10x overload (weir run end to end)" >&2
if timed "soak" "$out/soak.log" cargo nextest run -p weir --test soak --no-capture --no-fail-fast; then
  status=pass
else
  status=FAIL
  failed=1
fi
grep '^SOAK ' "$out/soak.log" | while read -r _ kind rest; do echo "$kind $rest"; done >"$out/soak.rows" || true
while read -r kind rest; do row "$kind" "$status" "$rest"; done <"$out/soak.rows"
[ -s "$out/soak.rows" ] || row "soak" "$status" "no summary line (see the log)"
[ "$status" = pass ] || tail -50 "$out/soak.log" >&2

echo "== WAL: SIGKILL at random moments (200 kills)" >&2
if timed "crash" "$out/crash.log" cargo nextest run -p weir-wal --test crash --no-capture; then
  row "wal crash" pass "$(grep -m1 -o '([0-9]* kills)' "$out/crash.log" || echo '(200 kills)'), every acknowledged record intact"
else
  row "wal crash" FAIL "see log"
  failed=1
  tail -50 "$out/crash.log" >&2
fi

for t in model faults; do
  echo "== WAL: $t proptest, $cases cases" >&2
  if PROPTEST_CASES="$cases" timed "$t" "$out/$t.log" cargo nextest run -p weir-wal --test "$t"; then
    row "wal $t" pass "$cases cases"
  else
    row "wal $t" FAIL "$(grep -m1 'Test failed' "$out/$t.log" | cut -c1-300)"
    failed=1
    tail -50 "$out/$t.log" >&2
  fi
done

# The fuzz targets need libFuzzer's instrumentation (nightly flags): with the machine's
# stable toolchain, RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass them.
echo "== fuzz targets, ${fuzz_secs} s each" >&2
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
fuzz_target="${CARGO_TARGET_DIR:-target}/fuzz"
mkdir -p "$fuzz_target"
fuzz_target="$(cd "$fuzz_target" && pwd)"
# weir-wal's (the segment reader) and weir's (the configuration, the NDJSON paths);
# each starts from its seeds (fuzz/seeds/TARGET, when present) in a corpus of its own
# under the logs, so the clone stays clean.
for crate in weir-wal weir; do
  for target in $(sed -n 's/^name = "\(.*\)"/\1/p' "crates/$crate/fuzz/Cargo.toml" | grep -v -- '-fuzz$'); do
    # The main lock file's versions, so the fuzz build compiles what the suite tests.
    [ -f "crates/$crate/fuzz/Cargo.lock" ] || cp Cargo.lock "crates/$crate/fuzz/Cargo.lock"
    corpus="$out/corpus-$target"
    mkdir -p "$corpus"
    if [ -d "crates/$crate/fuzz/seeds/$target" ]; then
      cp "crates/$crate/fuzz/seeds/$target"/* "$corpus"/
    fi
    if (cd "crates/$crate" && RUSTC_BOOTSTRAP=1 timed "fuzz $target" "$out/fuzz-$target.log" \
      cargo fuzz run --target-dir "$fuzz_target" "$target" "$corpus" -- -max_total_time="$fuzz_secs" -rss_limit_mb=2048); then
      row "fuzz $target" pass "$(grep -o '#[0-9]*.*DONE.*' "$out/fuzz-$target.log" | tail -1 || echo "${fuzz_secs} s")"
    else
      row "fuzz $target" FAIL "see log"
      failed=1
      tail -50 "$out/fuzz-$target.log" >&2
    fi
  done
done

echo
echo "| run | result | figures |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $failed

#!/usr/bin/env bash
# Kafka ingest benchmark (not a test, not in CI): a tansu broker → the release `weir`
# (kafka source → WAL, fsynced → blackhole) next to a bare librdkafka consumer that
# commits at once with no WAL, on the same broker in the same run, for 100 B and 1 KiB
# records; then seed 001's slow-sink experiment with and without pause/resume (see
# crates/weir/benches/kafka.rs).
#
#   ./scripts/bench-kafka.sh [--markdown] [N [SLOW_N]]
#       # N records per case (default 200000), SLOW_N for the slow sink (default 30000);
#       # --markdown: the tables for docs/benchmarks.md
set -euo pipefail
. "$(dirname "$0")/bench-markdown.sh" "$@"
set -- "${bench_args[@]+"${bench_args[@]}"}"
cd "$(dirname "$0")/.."
WEIR_TANSU="${WEIR_TANSU:-$(scripts/install-tansu.sh)}"
export WEIR_TANSU
md_intro
if [ "$markdown" = 1 ]; then
  WEIR_BENCH_MARKDOWN=1 WEIR_BENCH_N="${1:-200000}" WEIR_BENCH_SLOW_N="${2:-30000}" \
    cargo bench -q -p weir --bench kafka >&3
else
  WEIR_BENCH_N="${1:-200000}" WEIR_BENCH_SLOW_N="${2:-30000}" cargo bench -q -p weir --bench kafka
fi

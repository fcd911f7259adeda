#!/usr/bin/env bash
# Kafka ingest benchmark (not a test, not in CI): a tansu broker → the release `weir`
# (kafka source → WAL, fsynced → blackhole) next to a bare librdkafka consumer that
# commits at once with no WAL, on the same broker in the same run, for 100 B and 1 KiB
# records; then seed 001's slow-sink experiment with and without pause/resume (see
# crates/weir/benches/kafka.rs).
#
#   ./scripts/bench-kafka.sh [N [SLOW_N]]   # N records per case (default 200000),
#                                          # SLOW_N for the slow sink (default 30000)
set -euo pipefail
cd "$(dirname "$0")/.."
WEIR_TANSU="${WEIR_TANSU:-$(scripts/install-tansu.sh)}"
export WEIR_TANSU
WEIR_BENCH_N="${1:-200000}" WEIR_BENCH_SLOW_N="${2:-30000}" cargo bench -q -p weir --bench kafka

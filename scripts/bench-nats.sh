#!/usr/bin/env bash
# NATS JetStream ingest benchmark (not a test, not in CI): JetStream → the release
# `weir` (nats source → WAL, fsynced → blackhole) next to a bare async-nats pull
# consumer that acks each message at once with no WAL, on the same server in the same
# run, for 100 B and 1 KiB messages. Prints msg/s, MB/s, the ratio weir / bare, CPU
# per message and peak RSS of each (see crates/weir/benches/nats.rs).
#
#   ./scripts/bench-nats.sh [--markdown] [N]   # N messages per case, default 200000;
#                                             # --markdown: the table for docs/benchmarks.md
set -euo pipefail
. "$(dirname "$0")/bench-markdown.sh" "$@"
set -- "${bench_args[@]+"${bench_args[@]}"}"
cd "$(dirname "$0")/.."
[ -x /usr/sbin/nats-server ] || command -v nats-server >/dev/null ||
  apt-get install -y -qq nats-server >/dev/null
md_intro
if [ "$markdown" = 1 ]; then
  WEIR_BENCH_MARKDOWN=1 WEIR_BENCH_N="${1:-200000}" cargo bench -q -p weir --bench nats >&3
else
  WEIR_BENCH_N="${1:-200000}" cargo bench -q -p weir --bench nats
fi

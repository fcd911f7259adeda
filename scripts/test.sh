#!/usr/bin/env bash
# The whole test suite. Installs what the tests need when it is missing, builds once,
# runs every test. Long soak/fuzz runs only with WEIR_SOAK=1.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }

command -v cargo-nextest >/dev/null 2>&1 || cargo install cargo-nextest --locked
# The Parquet sink's tests read its files back with pyarrow and DuckDB.
python3 -c 'import pyarrow, duckdb' 2>/dev/null || pip install --quiet pyarrow duckdb
# The MQTT source's tests start their own Mosquitto broker and publish with its clients.
if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ] \
   || ! command -v mosquitto_pub >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq mosquitto mosquitto-clients
fi

# The MQTT tests need a Mosquitto that keeps its inflight window (>= 2.0.13; Debian 12
# ships 2.0.11): the script prints one, building it once from Debian's source if needed.
WEIR_MOSQUITTO="$(scripts/install-mosquitto.sh)"
export WEIR_MOSQUITTO

log "build (tests and binaries)"
cargo nextest run --workspace --no-run

log "tests"
cargo nextest run --workspace --no-fail-fast

log "doctests"
cargo test --workspace --exclude weir --doc   # weir is a binary: no doctests

log "loom models (weir-flow)"
# A separate target directory keeps the --cfg loom build from invalidating the main one.
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" RUSTFLAGS="--cfg loom" \
  CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/loom" \
  cargo test -p weir-flow --release --test loom

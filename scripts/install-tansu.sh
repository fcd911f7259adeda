#!/usr/bin/env bash
# Prints the path of a Kafka-protocol broker for weir's Kafka source tests: tansu, built
# once with `cargo install` into $WEIR_TOOLS (default ~/.cache/weir/tools) and reused
# afterwards (about 13 minutes on one core the first time). Its own target directory is
# kept under the same cache, so the build does not touch weir's.
#
# tansu 0.6.0 with the `dynostore` feature keeps its topics and consumer-group offsets
# in a directory (or in memory); each test starts its own broker on a free loopback port.
# Progress goes to stderr; stdout gets only the path.
set -euo pipefail

VERSION=0.6.0
tools="${WEIR_TOOLS:-$HOME/.cache/weir/tools}"
root="$tools/tansu-$VERSION"
bin="$root/bin/tansu"
if [ ! -x "$bin" ]; then
  mkdir -p "$root"
  printf 'building tansu %s into %s (once)\n' "$VERSION" "$root" >&2
  CARGO_TARGET_DIR="$tools/tansu-target" cargo install tansu --version "$VERSION" \
    --features dynostore --locked --root "$root" >&2
  rm -rf "$tools/tansu-target"
fi
printf '%s\n' "$bin"

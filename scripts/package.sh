#!/usr/bin/env bash
# Builds weir's Debian package with cargo-deb (installed once if missing): a release
# build of the weir binary (no debug info, symbols stripped) plus the files under
# packaging/debian/ (see [package.metadata.deb] in crates/weir/Cargo.toml). Prints the
# path of the .deb on stdout; cargo's output goes to stderr. Arguments go to `cargo deb`.
#
# A cold release build takes many minutes on 2 cores; later ones reuse the target
# directory (CARGO_TARGET_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo-deb >/dev/null 2>&1 || cargo install cargo-deb --locked >&2

# cargo-deb prints the path of the package it wrote as its last line.
deb="$(cargo deb -p weir "$@" | tail -n 1)"
if [ ! -f "$deb" ]; then
  echo "package.sh: cargo deb did not report a package file (got: $deb)" >&2
  exit 1
fi
echo "$deb"

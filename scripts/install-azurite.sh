#!/usr/bin/env bash
# Prints the path of Azurite's blob service (`azurite-blob`), the Azure Storage emulator
# the object-store sink's az:// tests run against: installed once with npm into
# $WEIR_TOOLS (default ~/.cache/weir/tools) and reused afterwards. Needs Node.js and npm.
#
# Azurite 3.35.0 is the newest release whose engines accept Node 20 (3.36 wants >= 21,
# 3.37 >= 22). The tests start their own instance on a free loopback port with its own
# directory. Progress goes to stderr; stdout gets only the path.
set -euo pipefail

VERSION=3.35.0
tools="${WEIR_TOOLS:-$HOME/.cache/weir/tools}"
root="$tools/azurite-$VERSION"
bin="$root/node_modules/.bin/azurite-blob"
if [ ! -x "$bin" ]; then
  command -v npm >/dev/null 2>&1 || {
    echo "install-azurite.sh: npm (Node.js) is needed to install Azurite" >&2
    exit 1
  }
  mkdir -p "$root"
  printf 'installing Azurite %s into %s (once)\n' "$VERSION" "$root" >&2
  npm install --prefix "$root" --no-audit --no-fund --loglevel=error \
    "azurite@$VERSION" >&2
fi
printf '%s\n' "$bin"

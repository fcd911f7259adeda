#!/usr/bin/env bash
# Prints the path of an S3-protocol server for weir's object-store tests: s3s-fs, built
# once with `cargo install` into $WEIR_TOOLS (default ~/.cache/weir/tools) and reused
# afterwards (about 4 minutes on 2 cores the first time). Its own target directory is
# kept under the same cache, so the build does not touch weir's.
#
# s3s-fs 0.14.1 is the newest release that builds with weir's Rust; it implements
# create, upload-part, complete and abort of multipart uploads (not
# ListMultipartUploads), keeping unfinished uploads as files under its root. A bucket is
# a directory under that root. Progress goes to stderr; stdout gets only the path.
set -euo pipefail

VERSION=0.14.1
tools="${WEIR_TOOLS:-$HOME/.cache/weir/tools}"
root="$tools/s3s-fs-$VERSION"
bin="$root/bin/s3s-fs"
if [ ! -x "$bin" ]; then
  mkdir -p "$root"
  printf 'building s3s-fs %s into %s (once)\n' "$VERSION" "$root" >&2
  CARGO_TARGET_DIR="$tools/s3s-fs-target" cargo install s3s-fs --version "$VERSION" \
    --features binary --locked --root "$root" >&2
  rm -rf "$tools/s3s-fs-target"
fi
printf '%s\n' "$bin"

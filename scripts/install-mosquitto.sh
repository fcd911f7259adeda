#!/usr/bin/env bash
# Prints the path of a Mosquitto broker (>= 2.0.13) for weir's MQTT tests, building one
# from Debian's source package when the installed broker is older or missing.
#
# Why not Debian 12's own mosquitto (2.0.11): its broker does not hold its inflight
# window. After each in-order PUBACK it moves up to max_inflight_messages more queued
# messages into flight (db__message_delete_outgoing counts only the inflight messages
# ahead of the acked one; fixed in 2.0.13, "various fixes around inflight quota
# management", mosquitto #2306), so a subscriber that withholds acks still receives far
# more than the window. weir's guard disconnects then, as designed, but the tests must
# measure weir against a broker that keeps its own limit.
#
# The build (about 25 s on 2 cores) goes to $WEIR_TOOLS (default /work/.cache/tools when
# /work/.cache exists, else ~/.cache/weir/tools) and is reused afterwards. Needs gcc,
# make and libssl-dev (installed with apt-get when missing). Progress goes to stderr.
set -euo pipefail

VERSION=2.0.21
DEB_REVISION=1
SHA256=551daff96cd0675faf888f8881536177934424ecc45924fecf94cffe207f6e81
POOL=http://deb.debian.org/debian/pool/main/m/mosquitto

if [[ -n "${WEIR_TOOLS:-}" ]]; then
  tools="$WEIR_TOOLS"
elif [[ -d /work/.cache ]]; then
  tools=/work/.cache/tools
else
  tools="$HOME/.cache/weir/tools"
fi
dest="$tools/mosquitto-$VERSION/mosquitto"

new_enough() {
  local v
  v=$("$1" -h 2>/dev/null | sed -n 's/^mosquitto version \([0-9.]*\).*/\1/p' | head -1)
  [[ -n "$v" && "$(printf '%s\n2.0.13\n' "$v" | sort -V | head -1)" == "2.0.13" ]]
}

for candidate in "$dest" "$(command -v mosquitto 2>/dev/null || true)" /usr/sbin/mosquitto; do
  if [[ -n "$candidate" && -x "$candidate" ]] && new_enough "$candidate"; then
    echo "$candidate"
    exit 0
  fi
done

echo "building mosquitto $VERSION from Debian's source package into $tools (once)" >&2
missing=()
command -v gcc >/dev/null || missing+=(gcc)
command -v make >/dev/null || missing+=(make)
dpkg -s libssl-dev >/dev/null 2>&1 || missing+=(libssl-dev)
if ((${#missing[@]})); then
  apt-get update -qq >&2 && apt-get install -y -qq "${missing[@]}" >&2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl -fsS -m 120 -o "$work/src.tar.gz" "$POOL/mosquitto_$VERSION.orig.tar.gz"
echo "$SHA256  $work/src.tar.gz" | sha256sum -c --quiet >&2
tar xzf "$work/src.tar.gz" -C "$work"
make -C "$work/mosquitto-$VERSION" -j2 WITH_CJSON=no WITH_DOCS=no WITH_WEBSOCKETS=no \
  WITH_SRV=no WITH_SYSTEMD=no WITH_ADNS=no binary >"$work/build.log" 2>&1 || {
  tail -30 "$work/build.log" >&2
  exit 1
}
mkdir -p "$(dirname "$dest")"
cp "$work/mosquitto-$VERSION/src/mosquitto" "$dest.tmp"
mv "$dest.tmp" "$dest"
echo "mosquitto $VERSION (Debian $VERSION-$DEB_REVISION source) at $dest" >&2
echo "$dest"

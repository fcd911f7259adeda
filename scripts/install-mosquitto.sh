#!/usr/bin/env bash
# Prints the path of a Mosquitto broker (>= 2.0.13) for weir's MQTT tests, building one
# from Debian's source package when the installed broker is older or missing.
#
# Why not Debian 12's own mosquitto (2.0.11): its broker does not hold its inflight
# window. After each in-order PUBACK it moves up to max_inflight_messages more queued
# messages into flight (db__message_delete_outgoing counts only the inflight messages
# ahead of the acked one; fixed in 2.0.13, "various fixes around inflight quota
# management", mosquitto #2306), so a subscriber that withholds acks still receives far
# more than the window. weir stops reading the socket then, as designed (the tests in
# run_mqtt_backlog.rs run against both brokers), but the other tests must measure weir
# against a broker that keeps its own limit.
#
# Where the source comes from: the next Debian release (trixie: 2.0.21), fetched by apt
# itself. The script reads the machine's own apt sources (one-line .list and deb822
# .sources files) for the Debian mirror they use, writes a temporary sources list with
# `deb-src <that mirror> trixie main` and runs `apt-get update` and `apt-get source` on it
# with a temporary lists and cache directory, so the system's apt sources and state stay
# as they are, and the machine's apt settings (proxies and the like) apply. apt checks the
# suite's signature against debian-archive-keyring (Debian 12's keyring carries the trixie
# keys; it is upgraded once if a key is missing) and the downloaded files' checksums
# against the signed index.
#
# The build (about 25 s on 2 cores) goes to $WEIR_TOOLS (default ~/.cache/weir/tools) and
# is reused afterwards. Needs dpkg-dev, gcc, make and libssl-dev (installed with apt-get
# when missing). Progress goes to stderr; stdout gets only the broker's path.
#
# Settings: WEIR_TOOLS (the cache), WEIR_MOSQUITTO_SUITE (the Debian suite to take the
# source from; default trixie), WEIR_DEBIAN_MIRROR (a mirror URI to use instead of the
# ones found in the apt sources).
set -euo pipefail

MIN_VERSION=2.0.13
SUITE="${WEIR_MOSQUITTO_SUITE:-trixie}"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
tools="${WEIR_TOOLS:-$HOME/.cache/weir/tools}"

say() { printf '%s\n' "$*" >&2; }

new_enough() {
  local v
  v=$({ "$1" -h 2>/dev/null || true; } | sed -n 's/^mosquitto version \([0-9.]*\).*/\1/p' | head -1)
  [[ -n "$v" && "$(printf '%s\n%s\n' "$v" "$MIN_VERSION" | sort -V | head -1)" == "$MIN_VERSION" ]]
}

# A broker this script built before (newest first), else the installed one if it is new enough.
find_broker() {
  local candidate
  while IFS= read -r candidate; do
    if [[ -n "$candidate" && -x "$candidate" ]] && new_enough "$candidate"; then
      echo "$candidate"
      return 0
    fi
  done < <(
    printf '%s\n' "$tools"/mosquitto-*/mosquitto | sort -rV
    command -v mosquitto 2>/dev/null || true
    echo /usr/sbin/mosquitto
  )
  return 1
}

find_broker && exit 0

sudo=()
[[ "$(id -u)" -eq 0 ]] || sudo=(sudo)
updated=""
apt_install() {
  if [[ -z "$updated" ]]; then
    "${sudo[@]}" apt-get update -qq >&2
    updated=1
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

mkdir -p "$tools"
# One build at a time (test binaries may run this script in parallel); the one that waited
# finds the other's broker.
exec 9>"$tools/.install-mosquitto.lock"
flock 9
find_broker && exit 0

say "building mosquitto from Debian's $SUITE source package into $tools (once)"
missing=()
command -v dpkg-source >/dev/null || missing+=(dpkg-dev)
command -v gcc >/dev/null || missing+=(gcc)
command -v make >/dev/null || missing+=(make)
dpkg -s libssl-dev >/dev/null 2>&1 || missing+=(libssl-dev)
[[ -r "$KEYRING" ]] || missing+=(debian-archive-keyring)
if ((${#missing[@]})); then
  apt_install "${missing[@]}"
fi

# The URIs of the machine's Debian release entries: deb or deb-src lines and deb822
# stanzas whose suite is a plain release name (not -updates, -security, -backports) with
# the main component; those ending in /debian first. Duplicates dropped.
debian_mirrors() {
  local list="" parts="" f
  eval "$(apt-config shell list Dir::Etc::SourceList/f parts Dir::Etc::SourceParts/d)"
  {
    for f in "$list" "$parts"*.list; do
      [[ -r "$f" ]] || continue
      awk '
        { sub(/#.*/, ""); gsub(/\[[^]]*\]/, " "); $0 = $0 }
        ($1 == "deb" || $1 == "deb-src") && NF >= 4 {
          main = 0
          for (i = 4; i <= NF; i++) if ($i == "main") main = 1
          if (main) print $2, $3
        }' "$f"
    done
    for f in "$parts"*.sources; do
      [[ -r "$f" ]] || continue
      awk '
        function flush(   i, j, nu, ns, u, s, t, c, ok, main) {
          t = " " f["types"] " "; c = " " f["components"] " "
          ok = (t ~ /[ \t]deb(-src)?[ \t]/) && tolower(f["enabled"]) !~ /^[ \t]*no/
          main = (c ~ /[ \t]main[ \t]/)
          if (ok && main) {
            nu = split(f["uris"], u, /[ \t]+/); ns = split(f["suites"], s, /[ \t]+/)
            for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
              if (u[i] != "" && s[j] != "") print u[i], s[j]
          }
          delete f; key = ""
        }
        /^#/ { next }
        /^[ \t]*$/ { flush(); next }
        /^[ \t]/ { if (key != "") f[key] = f[key] " " $0; next }
        {
          key = tolower(substr($0, 1, index($0, ":") - 1))
          f[key] = substr($0, index($0, ":") + 1)
        }
        END { flush() }' "$f"
    done
  } | awk '$2 !~ /[-\/]/ && $1 !~ /^cdrom:/ { u = $1; sub(/\/+$/, "", u); print (u ~ /\/debian$/ ? 0 : 1), u }' \
    | sort -s -k1,1n | awk '!seen[$2]++ { print $2 }'
}

mirrors=()
if [[ -n "${WEIR_DEBIAN_MIRROR:-}" ]]; then
  mirrors=("$WEIR_DEBIAN_MIRROR")
else
  mapfile -t mirrors < <(debian_mirrors)
fi
if ((${#mirrors[@]} == 0)); then
  say "no Debian mirror found in the apt sources; set WEIR_DEBIAN_MIRROR to one"
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# apt downloads as the unprivileged _apt user when run as root: it must reach the
# temporary directories.
chmod 755 "$work"
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/src"
if [[ "$(id -u)" -eq 0 ]] && id _apt >/dev/null 2>&1; then
  chown _apt "$work/src"
fi
apt_tmp=(
  -o "Dir::Etc::SourceList=$work/sources.list"
  -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$work/lists"
  -o "Dir::Cache=$work/cache"
)

# Reads the suite's signed index from one mirror; fails (with apt's message on stderr) when
# the signature does not verify or anything else goes wrong.
fetch_index() {
  echo "deb-src [signed-by=$KEYRING] $1 $SUITE main" >"$work/sources.list"
  rm -rf "$work/lists"/*InRelease "$work/lists"/*Sources*
  apt-get "${apt_tmp[@]}" update --error-on=any >"$work/update.log" 2>&1 &&
    apt-cache "${apt_tmp[@]}" showsrc mosquitto 2>/dev/null | grep -q '^Package: mosquitto$'
}

mirror=""
keyring_upgraded=""
for m in "${mirrors[@]}"; do
  say "reading $SUITE's source index from $m"
  if fetch_index "$m"; then
    mirror=$m
    break
  fi
  if [[ -z "$keyring_upgraded" ]] && grep -q NO_PUBKEY "$work/update.log"; then
    say "debian-archive-keyring lacks a key of $SUITE: upgrading it, then trying again"
    keyring_upgraded=1
    apt_install --only-upgrade debian-archive-keyring
    if fetch_index "$m"; then
      mirror=$m
      break
    fi
  fi
  cat "$work/update.log" >&2
done
if [[ -z "$mirror" ]]; then
  say "could not read a signed $SUITE source index from: ${mirrors[*]}"
  exit 1
fi

(cd "$work/src" && apt-get "${apt_tmp[@]}" source -q "mosquitto/$SUITE") >&2
dsc=$(printf '%s\n' "$work"/src/mosquitto_*.dsc | head -1)
deb_version=$(sed -n 's/^Version: //p' "$dsc")
version=${deb_version#*:}
version=${version%-*}
srcdir="$work/src/mosquitto-$version"
[[ -d "$srcdir" ]] || {
  say "apt-get source left no $srcdir"
  exit 1
}

make -C "$srcdir" -j2 WITH_CJSON=no WITH_DOCS=no WITH_WEBSOCKETS=no \
  WITH_SRV=no WITH_SYSTEMD=no WITH_ADNS=no binary >"$work/build.log" 2>&1 || {
  tail -30 "$work/build.log" >&2
  exit 1
}
new_enough "$srcdir/src/mosquitto" || {
  say "Debian $SUITE's mosquitto $deb_version is older than $MIN_VERSION"
  exit 1
}
dest="$tools/mosquitto-$version/mosquitto"
mkdir -p "$(dirname "$dest")"
cp "$srcdir/src/mosquitto" "$dest.tmp"
mv "$dest.tmp" "$dest"
say "mosquitto $version (Debian $deb_version source, $SUITE) at $dest"
echo "$dest"

#!/usr/bin/env bash
# The Debian package, tested on this machine: builds it (scripts/package.sh), installs
# it with dpkg, checks what it installed (the binary, the `weir` user, /var/lib/weir,
# the configuration, the systemd unit), then removes and purges it and checks what each
# leaves. Needs root (through sudo otherwise) and a machine where no weir package is
# installed. Run by scripts/test.sh with WEIR_PACKAGE=1.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)

passed=0
failed=0
ok() { passed=$((passed + 1)); printf 'ok: %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAILED: %s\n' "$*"; }
check() { # check DESCRIPTION COMMAND...: passes when COMMAND succeeds
  local what="$1"
  shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}

if dpkg-query -W -f='${Status}' weir 2>/dev/null | grep -q 'installed'; then
  echo "test-package.sh: a weir package is installed already; remove it first" >&2
  exit 1
fi
if getent passwd weir >/dev/null || [ -e /var/lib/weir ]; then
  echo "test-package.sh: a weir user or /var/lib/weir exists already; this test creates and deletes both" >&2
  exit 1
fi

printf '\n== building the package\n'
deb="$(scripts/package.sh)"
printf '%s (%s bytes); the binary in it: %s bytes\n' "$deb" "$(stat -c %s "$deb")" \
  "$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/bin/weir | wc -c)"

# Whatever happens below, the machine is left without the package.
cleanup() {
  if dpkg-query -W -f='${Status}' weir 2>/dev/null | grep -q 'ok'; then
    "${sudo[@]}" dpkg --purge weir >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

printf '\n== dpkg -i\n'
"${sudo[@]}" dpkg -i "$deb"

printf '\n== what it installed\n'
version="$(/usr/bin/weir --version)"
echo "$version"
check "weir --version names the version and the commit" \
  grep -Eq '^weir [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]{7,}\)$' <<<"$version"
check "the weir system user exists, home /var/lib/weir, no login shell" \
  bash -c 'IFS=: read -r _ _ uid _ _ home shell < <(getent passwd weir) &&
    [ "$uid" -lt 1000 ] && [ "$home" = /var/lib/weir ] && [[ "$shell" == */nologin || "$shell" == */false ]]'
check "/var/lib/weir is owned by weir, mode 750" \
  test "$(stat -c '%U:%G %a' /var/lib/weir)" = "weir:weir 750"
check "/etc/weir/weir.toml is a conffile, root:weir, mode 640" \
  bash -c "dpkg-query -W -f='\${Conffiles}' weir | grep -q '/etc/weir/weir.toml' &&
    test \"\$(stat -c '%U:%G %a' /etc/weir/weir.toml)\" = 'root:weir 640'"

unit=/lib/systemd/system/weir.service
check "the unit is Type=notify, reloads with SIGHUP, runs as weir, hardened" \
  bash -c "grep -qx 'Type=notify' $unit && grep -qx 'ExecReload=/bin/kill -HUP \$MAINPID' $unit &&
    grep -qx 'User=weir' $unit && grep -qx 'ProtectSystem=strict' $unit &&
    grep -qx 'ReadWritePaths=/var/lib/weir' $unit && grep -qx 'NoNewPrivileges=yes' $unit"

# systemd-analyze verify loads the unit the way systemd would (its directives, the
# binaries its Exec lines name, the users), without a running systemd: this machine is
# a container without one. --man=no: the man pages of Documentation= are not looked up.
printf '\n== systemd-analyze verify %s\n' "$unit"
if verify="$(systemd-analyze verify --man=no "$unit" 2>&1)" && [ -z "$verify" ]; then
  ok "systemd-analyze verify passes, with nothing to say"
else
  printf '%s\n' "$verify"
  fail "systemd-analyze verify"
fi
printf '\n== systemd-analyze security --offline=yes (exposure; lower is better)\n'
systemd-analyze security --offline=yes --no-pager "$unit" 2>&1 | tail -n 1 || true

printf '\n== the installed binary validates the installed config, as weir\n'
if "${sudo[@]}" runuser -u weir -- /usr/bin/weir validate /etc/weir/weir.toml >/tmp/weir-validate.$$ 2>&1; then
  ok "runuser -u weir -- weir validate /etc/weir/weir.toml"
else
  cat /tmp/weir-validate.$$
  fail "weir validate /etc/weir/weir.toml (as weir)"
fi
rm -f /tmp/weir-validate.$$

printf '\n== dpkg -r weir\n'
"${sudo[@]}" mkdir -p /var/lib/weir/wal
"${sudo[@]}" dpkg -r weir
check "remove: the binary and the unit are gone" test ! -e /usr/bin/weir -a ! -e "$unit"
check "remove: /var/lib/weir, the weir user and the conffile stay" \
  bash -c 'test -d /var/lib/weir/wal && getent passwd weir >/dev/null && test -f /etc/weir/weir.toml'

printf '\n== dpkg --purge weir\n'
"${sudo[@]}" dpkg --purge weir
check "purge: /var/lib/weir and /etc/weir are gone" test ! -e /var/lib/weir -a ! -e /etc/weir
check "purge: the weir user and group are gone" \
  bash -c '! getent passwd weir >/dev/null && ! getent group weir >/dev/null'

printf '\npackage test: %d passed, %d failed\n' "$passed" "$failed"
[ "$failed" -eq 0 ]

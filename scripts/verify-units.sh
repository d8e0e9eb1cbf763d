#!/bin/sh
# Checks systemd/confabd.service and systemd/confabd.socket the way a user manager loads
# them after `make install`: a copy with @BINDIR@ pointing at a real executable, in a temp
# directory, through `systemd-analyze verify --user`. Prints what systemd-analyze says and
# fails (exit 1) on any output at all, warnings included.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "verify-units: systemd-analyze not found (Debian: apt-get install systemd)" >&2
    exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/confab-verify-units.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
mkdir -m 0700 "$tmp/runtime" "$tmp/units" "$tmp/bin"

# verify checks that ExecStart= names an executable; a stub stands in for confabd.
printf '#!/bin/sh\nexit 0\n' > "$tmp/bin/confabd"
chmod 0755 "$tmp/bin/confabd"
sed "s|@BINDIR@|$tmp/bin|g" "$repo/systemd/confabd.service" > "$tmp/units/confabd.service"
cp "$repo/systemd/confabd.socket" "$tmp/units/confabd.socket"
if grep -q '@[A-Z]*@' "$tmp/units/confabd.service" "$tmp/units/confabd.socket"; then
    echo "verify-units: an @PLACEHOLDER@ is left after substitution:" >&2
    grep -n '@[A-Z]*@' "$tmp/units/confabd.service" "$tmp/units/confabd.socket" >&2
    exit 1
fi

# A user manager needs a runtime directory even to verify (%t).
status=0
output=$(cd "$tmp/units" && XDG_RUNTIME_DIR="$tmp/runtime" SYSTEMD_LOG_COLOR=0 \
    systemd-analyze verify --user "$tmp/units/confabd.socket" "$tmp/units/confabd.service" 2>&1) || status=$?

if [ -n "$output" ] || [ "$status" -ne 0 ]; then
    printf '%s\n' "$output" | sed "s|$tmp/units/||g"
    echo "verify-units: systemd-analyze verify --user failed (exit $status)" >&2
    exit 1
fi
echo "verify-units: confabd.service and confabd.socket verify cleanly ($(systemd-analyze --version | head -1))"

#!/bin/sh
# Checks the shipped systemd/confabd.service and systemd/confabd.socket exactly as they are,
# with nothing substituted and nothing installed:
#   1. `systemd-analyze verify systemd/*` from the repository root;
#   2. the same files through `systemd-analyze --user verify`, as the user manager loads them
#      after `make install` (in a temporary runtime directory: a user manager needs one even
#      to verify, for %t).
# Prints what systemd-analyze says and fails (exit 1) on any output at all, warnings included.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "verify-units: systemd-analyze not found (Debian: apt-get install systemd)" >&2
    exit 2
fi
cd "$repo"
if grep -n '@[A-Z_]*@' systemd/*; then
    echo "verify-units: the shipped units must work as they are, without an @PLACEHOLDER@" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/confab-verify-units.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
mkdir -m 0700 "$tmp/runtime"

failed=0
check() {
    status=0
    output=$("$@" 2>&1) || status=$?
    if [ -n "$output" ] || [ "$status" -ne 0 ]; then
        printf '%s\n' "$output"
        echo "verify-units: \`$*\` failed (exit $status)" >&2
        failed=1
    fi
}
export SYSTEMD_LOG_COLOR=0
check systemd-analyze verify systemd/*
check env XDG_RUNTIME_DIR="$tmp/runtime" systemd-analyze --user verify systemd/*
[ "$failed" -eq 0 ] || exit 1
echo "verify-units: confabd.service and confabd.socket verify cleanly ($(systemd-analyze --version | head -1))"

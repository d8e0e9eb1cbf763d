#!/usr/bin/env bash
# Runs the XCTest suites on the build `make test` made, and ends with one line naming every
# test that skipped: a developer's run may skip what the machine lacks (root, a tool, the MCP
# environment) and must say so; under CI=true such a test fails instead (Unavailable.swift).
set -uo pipefail
swift="${SWIFT:-swift}"
output="$(mktemp)"
trap 'rm -f "$output"' EXIT
"$swift" test --skip-build --disable-swift-testing "$@" 2>&1 | tee "$output"
status=${PIPESTATUS[0]}
skipped="$(sed -n "s/^Test Case '\(.*\)' skipped.*/\1/p" "$output" | sort -u)"
if [ -n "$skipped" ]; then
    echo "skipped: $(printf '%s\n' "$skipped" | wc -l) tests ($(printf '%s\n' "$skipped" | paste -sd' ' -)): this machine lacks what they need"
fi
exit "$status"

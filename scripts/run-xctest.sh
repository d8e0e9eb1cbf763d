#!/usr/bin/env bash
# Runs the XCTest suites on the build `make test` made, in parallel worker processes
# (scripts/xctest-pool.py: one per core, XCTEST_JOBS to change it); arguments go to it
# (`--filter REGEX`, `--jobs N`). It ends with one line naming every test that skipped: a
# developer's run may skip what the machine lacks (root, a tool, the MCP environment) and must
# say so; under CI=true such a test fails instead (Unavailable.swift).
set -euo pipefail
exec python3 "$(dirname "$0")/xctest-pool.py" "$@"

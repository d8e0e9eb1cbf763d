#!/bin/sh
# The short runs of the long checks that `make test` adds after the XCTest suite: a 20-kill
# crash loop, the crash loop's self-test (a fault planted per oracle, each must be reported),
# its self-test against the daemon (a 1- or 2-kill loop per fault mode of the debug confabd,
# CONFAB_DEBUG_FAULT, each must be reported by its oracle; no MCP: it adds a server start and
# no oracle these faults meet), a 1-minute soak and the soak's own self-test against the daemon
# (6 s of load, a user message stored otherwise than sent), and 10 power cuts, on the debug
# build the suite just used. The MCP server
# (Python on the SDK, slow to start) is called in 2 of the crash loop's 21 rounds, 1 of the
# self-test's 3 (two calls: one per tool fault), and 2 of the power cuts' 11.
# Each prints one line when it passes and its whole summary when it fails; the exit status
# is 1 if any failed. Usage: scripts/long-checks.sh BIN_DIR POWERCUT_SHIM
set -u
bin=$1
shim=$2
here=$(dirname "$0")
status=0
total_start=$(date +%s)

# run NAME PATTERN COMMAND...: PATTERN picks the summary lines shown when it passes.
run() {
    name=$1 pattern=$2
    shift 2
    out=$(mktemp)
    start=$(date +%s)
    if "$@" >"$out" 2>&1; then
        echo "$name: passed in $(( $(date +%s) - start )) s: $(grep -E "$pattern" "$out" | sed 's/^ *//' | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
    else
        echo "$name: FAILED after $(( $(date +%s) - start )) s:"
        tail -n 80 "$out"
        status=1
    fi
    rm -f "$out"
}

run "crash loop" "summary \(seed|announced messages checked|oracles:|failures:" \
    python3 "$here/crashloop.py" --bin-dir "$bin" --kills 20 --max-seconds 180 --mcp-every 10
run "crash loop self-test" "self-test: oracle|self-test: (every|FAILED)" \
    python3 "$here/crashloop.py" --bin-dir "$bin" --kills 2 --max-seconds 60 --attach-rate 0.6 --mcp-every 2 --plant-faults
# The first four strike at the first send of the check after the first start, which the check
# after the kill reads; a blob is removed at the first send with files, which the load makes
# before a kill that may come at once: two kills for it.
for fault in drop-record unstored-announce reply-byte user-byte blob-removed; do
    kills=1
    [ "$fault" = blob-removed ] && kills=2
    run "crash loop daemon fault $fault" "self-test: daemon fault" \
        python3 "$here/crashloop.py" --bin-dir "$bin" --kills $kills --max-seconds 60 --attach-rate 0.6 --mcp-python none \
            --daemon-fault "$fault"
done
run "power cuts" "summary \(seed|power cuts:|rounds started from|announced messages checked|oracles:|failures:" \
    python3 "$here/powercut.py" --bin-dir "$bin" --shim "$shim" --kills 10 --max-seconds 120
run "soak" "soak summary|^files and shares|^stored replies compared|^after the restart, read back|VERDICT" \
    python3 "$here/soak.py" --bin "$bin" --minutes 1
run "soak daemon fault user-byte" "self-test: daemon fault" \
    python3 "$here/soak.py" --bin "$bin" --minutes 0.1 --daemon-fault user-byte
echo "long checks: $(( $(date +%s) - total_start )) s"
exit $status

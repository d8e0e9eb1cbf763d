#!/usr/bin/env bash
# Builds the libFuzzer harnesses in fuzz/ and runs each for a bounded time.
#
#   scripts/fuzz.sh [seconds-per-target] [target...]     (default 60 s; targets: protocol sse)
#
# Each target first replays its saved crashes (fuzz/regressions/<target>/, which must all
# pass), then fuzzes from a working copy of fuzz/corpus/<target>/ in a temporary directory,
# with -max_total_time=<seconds> -rss_limit_mb=2048. The seed corpus in the repository is
# never modified. Prints executions, exec/s, coverage and the result per target; exits 1 if
# any target found a crash (the reproducer's path is printed; the temporary directory is then
# kept), 2 if the toolchain cannot build fuzzers.
#
# Environment: FUZZ_BUILD_DIR (default .build-fuzz in the repository, git-ignored),
# FUZZ_KEEP=1 keeps the temporary directories (with the grown corpus and the log),
# SWIFTC (default swiftc).
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$PWD
SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(protocol sse)
case $SECONDS_PER_TARGET in ''|*[!0-9]*) echo "usage: $0 [seconds-per-target] [protocol|sse ...]" >&2; exit 2 ;; esac

SWIFTC=${SWIFTC:-swiftc}
BUILD=${FUZZ_BUILD_DIR:-$REPO/.build-fuzz}
mkdir -p "$BUILD"
FLAGS=(-O -sanitize=fuzzer,address -parse-as-library -swift-version 6 -warnings-as-errors -use-ld=lld)
# The Swift runtime's crash backtracer fights ASan for the fatal signal; libFuzzer reports.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

# Can this toolchain build a libFuzzer binary at all?
probe=$BUILD/probe.swift
cat > "$probe" <<'EOF'
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt { 0 }
EOF
if ! "$SWIFTC" "${FLAGS[@]}" "$probe" -o "$BUILD/probe" >"$BUILD/probe.log" 2>&1; then
    echo "this toolchain cannot build with -sanitize=fuzzer,address (see $BUILD/probe.log)" >&2
    exit 2
fi

build() {
    local target=$1 log=$BUILD/build-$1.log
    case $target in
    protocol)
        # The harness is compiled into the same module as the sources it fuzzes.
        "$SWIFTC" "${FLAGS[@]}" Sources/ConfabProtocol/*.swift fuzz/FuzzInput.swift fuzz/ProtocolFuzz.swift \
            -o "$BUILD/protocol-fuzz" >"$log" 2>&1 ;;
    sse)
        # The stream's files import ConfabProtocol and SSE: build those first as instrumented
        # static libraries, then the Upstream files the decoder is made of plus the harness as
        # module Upstream.
        "$SWIFTC" "${FLAGS[@]}" -module-name ConfabProtocol -emit-library -static \
            -emit-module -emit-module-path "$BUILD/ConfabProtocol.swiftmodule" \
            Sources/ConfabProtocol/*.swift -o "$BUILD/libConfabProtocol.a" >"$log" 2>&1 &&
        "$SWIFTC" "${FLAGS[@]}" -module-name SSE -emit-library -static \
            -emit-module -emit-module-path "$BUILD/SSE.swiftmodule" \
            Sources/SSE/*.swift -o "$BUILD/libSSE.a" >>"$log" 2>&1 &&
        "$SWIFTC" "${FLAGS[@]}" -module-name Upstream -I "$BUILD" -L "$BUILD" -lConfabProtocol -lSSE \
            Sources/Upstream/ChatStream.swift Sources/Upstream/ChatStreamDecoder.swift \
            Sources/Upstream/ChatStreamShapes.swift Sources/Upstream/ToolCallAssembler.swift \
            Sources/Upstream/UpstreamErrorBody.swift fuzz/FuzzInput.swift fuzz/SSEFuzz.swift \
            -o "$BUILD/sse-fuzz" >>"$log" 2>&1 ;;
    *) echo "unknown target $target" >&2; return 1 ;;
    esac || { echo "build of $target failed:" >&2; cat "$log" >&2; return 1; }
}

# Value of `key:` on the last status line libFuzzer printed (e.g. cov, ft, corp).
last_stat() { grep -E "^#[0-9]+" "$2" | tail -1 | sed -nE "s/.* $1: ([^ ]+).*/\1/p"; }
final_stat() { sed -nE "s/^stat::$1: *([0-9]+).*/\1/p" "$2" | tail -1; }

failures=0
printf '%-9s %8s %12s %8s %6s %8s  %s\n' target seconds executions exec/s cov corpus result
for target in "${TARGETS[@]}"; do
    build "$target"
    binary=$BUILD/$target-fuzz
    work=$(mktemp -d "${TMPDIR:-/tmp}/confab-fuzz-$target.XXXXXX")
    mkdir -p "$work/corpus" "$work/artifacts"
    cp fuzz/corpus/"$target"/* "$work/corpus/"
    log=$work/fuzz.log
    result=ok

    # Saved crashes first: each must now run clean.
    if compgen -G "fuzz/regressions/$target/*" >/dev/null; then
        if ! "$binary" -runs=1 fuzz/regressions/"$target"/* >"$work/regressions.log" 2>&1; then
            result="REGRESSION (see $work/regressions.log)"
        fi
    fi

    start=$(date +%s)
    status=0
    # A hard stop well past -max_total_time in case the process wedges.
    timeout --kill-after=10 $((SECONDS_PER_TARGET + 120)) "$binary" \
        -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10 -max_len=16384 \
        -dict="fuzz/$target.dict" -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
        "$work/corpus" >"$log" 2>&1 || status=$?
    elapsed=$(( $(date +%s) - start ))
    if [ "$status" -ne 0 ]; then
        artifacts=$(ls "$work/artifacts" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')
        result="CRASH (exit $status): ${artifacts:-no artifact} in $work/artifacts, log $log"
    fi
    execs=$(final_stat number_of_executed_units "$log")
    rate=$(final_stat average_exec_per_sec "$log")
    printf '%-9s %8s %12s %8s %6s %8s  %s\n' "$target" "$elapsed" "${execs:-?}" "${rate:-?}" \
        "$(last_stat cov "$log")" "$(last_stat corp "$log" | cut -d/ -f1)" "$result"
    if [ "$result" = ok ]; then
        [ "${FUZZ_KEEP:-0}" = 1 ] && echo "          kept $work" || rm -rf "$work"
    else
        failures=$((failures + 1))
    fi
done

if [ "$failures" -gt 0 ]; then
    echo "$failures target(s) failed. Minimise a crash with: $BUILD/<target>-fuzz -minimize_crash=1 -runs=10000 <crash-file>," >&2
    echo "then save it under fuzz/regressions/<target>/ and replay it in a FuzzRegressionTests.swift." >&2
    exit 1
fi

#!/usr/bin/env bash
# Builds Benchmarks/json/JSONBench.swift with release flags against the sources of
# ConfabProtocol, SSE and Upstream (as scripts/fuzz.sh does, without SwiftPM) and runs it with the
# allocator counter preloaded.
#
#   Benchmarks/json/run.sh [iterations [name]]   (default 200000 per measurement, best of 5;
#                                                name: only the measurements whose name holds it)
#
# Environment: JSON_BENCH_BUILD (default .build-jsonbench), SWIFTC, CC,
# JSON_BENCH_FLAGS (extra swiftc flags, e.g. -DDELTA_FRAME when the tree has RPC.writeDelta).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${JSON_BENCH_BUILD:-$PWD/.build-jsonbench}
SWIFTC=${SWIFTC:-swiftc}
mkdir -p "$BUILD"
FLAGS=(-O -wmo -swift-version 6 -parse-as-library)
EXTRA=()
if grep -q "func writeDelta" Sources/ConfabProtocol/*.swift; then EXTRA+=(-DDELTA_FRAME); fi
# shellcheck disable=SC2206
EXTRA+=(${JSON_BENCH_FLAGS:-})

"$SWIFTC" "${FLAGS[@]}" -module-name ConfabProtocol -emit-library -static \
    -emit-module -emit-module-path "$BUILD/ConfabProtocol.swiftmodule" \
    Sources/ConfabProtocol/*.swift -o "$BUILD/libConfabProtocol.a"
"$SWIFTC" "${FLAGS[@]}" -module-name SSE -emit-library -static \
    -emit-module -emit-module-path "$BUILD/SSE.swiftmodule" \
    Sources/SSE/*.swift -o "$BUILD/libSSE.a"
"$SWIFTC" "${FLAGS[@]}" -module-name Upstream -emit-library -static -I "$BUILD" \
    -emit-module -emit-module-path "$BUILD/Upstream.swiftmodule" \
    Sources/Upstream/ChatStream.swift Sources/Upstream/ChatStreamDecoder.swift Sources/Upstream/ChatStreamShapes.swift \
    Sources/Upstream/ToolCallAssembler.swift Sources/Upstream/UpstreamErrorBody.swift -o "$BUILD/libUpstream.a"
"$SWIFTC" -O -swift-version 6 "${EXTRA[@]}" -module-name JSONBench -I "$BUILD" -L "$BUILD" -lUpstream -lSSE -lConfabProtocol \
    Benchmarks/json/JSONBench.swift -o "$BUILD/jsonbench"
"${CC:-cc}" -O2 -shared -fPIC -o "$BUILD/malloccount.so" Benchmarks/json/malloccount.c -ldl

echo "JSON benchmark: $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores, ${1:-200000} iterations, best of 5"
LD_PRELOAD="$BUILD/malloccount.so" "$BUILD/jsonbench" "${1:-200000}" ${2:+"$2"}

#!/usr/bin/env bash
# Fails when the daemon reads a request's params by a string key instead of through the
# method's typed params (ConfabProtocol/Calls.swift), where each field name is spelled once
# for reading and writing; or when the method table (Broker/Methods/MethodTable.swift) or the access
# table that reads it gains a `default:`, which would classify every future method silently.
# Usage: scripts/check-typed-params.sh [source directory]   (default: Sources beside this script)
set -euo pipefail

root="${1:-$(dirname "$0")/../Sources}"
broker="$root/Broker"

found=0
# A string-keyed read: `params.string("title")`, `p.optionalInt("limit", …)`, `params.members["x"]`,
# `params["x"]` (any receiver whose name ends in params or Params; writing a notification's
# `params["conversation"] = …` is no read). Line comments are left out.
pattern='[A-Za-z0-9_)]\.(string|optionalString|optionalBool|optionalInt|optionalDouble|bool|int)\("'
pattern+='|\.members\[|[Pp]arams\??\[\s*"'
hits=$(grep -rnE --include='*.swift' "$pattern" "$broker" | grep -vE '^[^:]+:[0-9]+:\s*//' | grep -vE '\bJSON\.string\(' \
    | grep -vE '[Pp]arams\[\s*"[^"]*"\]\s*=[^=]' || true)
if [[ -n "$hits" ]]; then
    echo "check-typed-params: string-keyed params reads in Sources/Broker (read them through the method's typed params in ConfabProtocol/Calls.swift):" >&2
    echo "$hits" >&2
    found=1
fi

for table in "$broker/Methods/MethodTable.swift" "$broker/Clients/Access.swift"; do
    if [[ ! -f "$table" ]]; then
        echo "check-typed-params: $table is not there; say where the table moved" >&2
        found=1
        continue
    fi
    if grep -nE '^\s*default\s*:' "$table" >&2; then
        echo "check-typed-params: $table has a default: case; every method needs its own row" >&2
        found=1
    fi
done

exit $found

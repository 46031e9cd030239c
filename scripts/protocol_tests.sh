#!/usr/bin/env bash
# The protocol modules (require "moonwire.mqtt", ...) against the real servers: each
# scripts/protocols/NAME.sh starts its server(s), runs its examples and tests with the
# moonwire binary given in MOONWIRE_BIN, and stops what it started by PID.
# usage: MOONWIRE_BIN=PATH scripts/protocol_tests.sh [NAME...]   (default: every one)
# Prints "N passed, N failed" (one per script) and exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${MOONWIRE_BIN:=$(swift build --show-bin-path)/moonwire}"
export MOONWIRE_BIN
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in scripts/protocols/*.sh; do [ -e "$f" ] && names+=("$(basename "$f" .sh)"); done
fi
passed=0 failed=0 failures=()
for name in "${names[@]}"; do
    echo "== protocol: $name" >&2
    if bash "scripts/protocols/$name.sh"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)); failures+=("$name")
    fi
done
[ $failed -eq 0 ] || echo "protocol tests failed: ${failures[*]}" >&2
echo "protocols: $passed passed, $failed failed"
[ $failed -eq 0 ]

#!/usr/bin/env bash
# Every test: installs what is missing, builds, runs the Swift test suites (unit,
# bridge, CLI and examples over real processes), checks every example compiles,
# and runs the Lua bridge's tests again under AddressSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
Tests/MoonwireCoreTests/Peers/setup_venv.sh >/dev/null

swift build --build-tests
bin="$(swift build --show-bin-path)/moonwire"

echo "== docs show the example files as they are" >&2
python3 scripts/check_doc_examples.py

echo "== moonwire check examples/" >&2
"$bin" check examples/*.lua

echo "== luacheck examples/ (the .luacheckrc moonwire init writes)" >&2
lint="$(mktemp -d)"
"$bin" init "$lint" >/dev/null
luacheck --no-color -q --config "$lint/.luacheckrc" examples/
rm -rf "$lint"

echo "== moonwire test examples/tests" >&2
"$bin" test examples/tests

echo "== scripts/formats/diff.py: mw.msgpack and mw.cbor against Python's msgpack and cbor2" >&2
"$(Tests/MoonwireCoreTests/Peers/setup_venv.sh)" scripts/formats/diff.py "$bin"

echo "== moonwire test --virtual-time examples/tests" >&2
"$bin" test --virtual-time examples/tests

echo "== moonwire run examples/load_rate.lua (half a second, thresholds gate)" >&2
"$bin" run --summary examples/load_rate.lua - 50 0.5

echo "== moonwire run examples/load_vus.lua (one second: each VU's connection closed, the run ends)" >&2
"$bin" run --summary examples/load_vus.lua - 5 1

echo "== moonwire run examples/protobuf_bot.lua (serves itself: login, welcome, say, echo)" >&2
out=$("$bin" run examples/protobuf_bot.lua)
grep -q '^got "echo: hi" tagged greeting$' <<<"$out" || { echo "$out" >&2; exit 1; }

echo "== mw.protobuf against Python's protobuf (scripts/protobuf_diff.sh)" >&2
scripts/protobuf_diff.sh "$bin"

# The Swift Testing suites, run from their binary as `swift test` would run it, under a
# watchdog: a test that hangs is named and the run fails, instead of CI timing out
# (scripts/watchdog.sh). Its output reaches the log line by line as each test ends.
echo "== swift test" >&2
events="$(mktemp)"
trap 'rm -f "$events"' EXIT
NO_COLOR=1 WATCHDOG_EVENTS="$events" scripts/watchdog.sh 900 \
    "$(swift build --show-bin-path)/moonwirePackageTests.xctest" --testing-library swift-testing \
    --event-stream-output-path "$events" --event-stream-version 0

# The protocol modules against their real servers (scripts/protocols/*.sh).
echo "== protocol modules against real servers" >&2
MOONWIRE_BIN="$bin" scripts/watchdog.sh 900 scripts/protocol_tests.sh

# A run spread over real engines: a one-node Slurm cluster, podman containers from the
# project's image, `podman kube play` of the Kubernetes pod (scripts/cluster_tests.sh,
# ~2 min; a part the machine refuses is skipped with the reason).
if [ "${MOONWIRE_SKIP_CLUSTER:-}" != "1" ]; then
    echo "== cluster engines (Slurm, podman, kube play)" >&2
    MOONWIRE_BIN="$bin" scripts/watchdog.sh 900 scripts/cluster_tests.sh
fi

if [ "${MOONWIRE_SKIP_AUTOBAHN:-}" != "1" ]; then
    # Autobahn|Testsuite, CI set (groups 1-7 and 10, ~10 s once the suite is
    # installed): fails on any FAILED case. The full run: scripts/autobahn.sh --all.
    echo "== autobahn (groups 1-7, 10)" >&2
    MOONWIRE_BIN="$bin" scripts/watchdog.sh 900 scripts/autobahn.sh
    # Server side, the suite as the client (1-7, 9.1, 12.1 with permessage-deflate,
    # ~1 min): fails on any case not OK or INFORMATIONAL.
    echo "== autobahn server (groups 1-7, 9.1, 12.1)" >&2
    MOONWIRE_BIN="$bin" scripts/watchdog.sh 900 scripts/autobahn.sh --server
fi

if [ "${MOONWIRE_SKIP_ASAN:-}" != "1" ]; then
    echo "== swift test under AddressSanitizer (Lua bridge and runtime)" >&2
    # MOONWIRE_ASAN (Package.swift): moonwire's own targets, Swift and C, are rebuilt with
    # the sanitizer in .build, over the debug build above, whose dependencies (NIO,
    # BoringSSL, ...) they reuse uninstrumented. So this phase comes last, and the next plain
    # build recompiles moonwire's targets. LeakSanitizer checks the Swift side at exit;
    # XCTest's own leftovers are suppressed.
    MOONWIRE_ASAN=1 LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp" \
        scripts/watchdog.sh 1500 swift test --filter MoonwireLuaTests
fi

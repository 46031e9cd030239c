#!/usr/bin/env bash
# Every test: installs what is missing, builds, runs the Swift test suites (unit,
# bridge, CLI and examples over real processes), checks every example compiles,
# and runs the Lua bridge's tests again under AddressSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

swift build --build-tests
bin="$(swift build --show-bin-path)/moonwire"

echo "== moonwire check examples/" >&2
"$bin" check examples/*.lua

echo "== swift test" >&2
swift test --skip-build

if [ "${MOONWIRE_SKIP_ASAN:-}" != "1" ]; then
    echo "== swift test under AddressSanitizer (Lua bridge and runtime)" >&2
    # MOONWIRE_ASAN tells the memory tests that ASan's quarantine holds freed memory
    # on purpose, so only Lua's own heap is checked for growth there; LeakSanitizer
    # checks the rest at exit.
    MOONWIRE_ASAN=1 LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp" \
        swift test --sanitize=address --scratch-path .build-asan --filter MoonwireLuaTests
fi

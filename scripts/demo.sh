#!/usr/bin/env bash
# The demo: installs what is missing, builds moonwire and runs the example scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
swift build --product moonwire 2>&1 | tail -n 1
bin="$(swift build --show-bin-path)/moonwire"
echo "== moonwire run examples/hello.lua" >&2
"$bin" run examples/hello.lua
echo "== moonwire run examples/timers.lua" >&2
"$bin" run examples/timers.lua

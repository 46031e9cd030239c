#!/usr/bin/env bash
# The demo: installs what is missing, builds moonwire, and runs a chat server
# with three bots in one process (examples/demo.lua), no outside network.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
swift build --product moonwire 2>&1 | tail -n 1
bin="$(swift build --show-bin-path)/moonwire"
echo "== moonwire run examples/demo.lua" >&2
"$bin" run examples/demo.lua

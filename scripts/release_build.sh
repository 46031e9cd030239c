#!/usr/bin/env bash
# The release build every script here makes (install, benchmarks, profiles):
#   scripts/release_build.sh --product moonwire
#   scripts/release_build.sh --show-bin-path
# It is `swift build -c release` with Swift's run-time exclusivity checks off in every
# module, SwiftNIO's included. Package.swift turns them off for moonwire's own modules
# only (a package cannot set its dependencies' flags); on the rtt path NIO's checks alone
# were about 45 swift_beginAccess calls and 5 000 instructions per message
# (docs/performance.md). One event-loop thread runs each Lua state and its channels, and
# debug builds (the tests, the AddressSanitizer runs) keep every check.
set -euo pipefail
cd "$(dirname "$0")/.."
exec swift build -c release -Xswiftc -enforce-exclusivity=unchecked "$@"

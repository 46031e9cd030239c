#!/usr/bin/env bash
# The release build every script here makes (install, benchmarks, profiles):
#   scripts/release_build.sh --product moonwire
#   scripts/release_build.sh --show-bin-path
# It is `swift build -c release` with two additions, both for the message path:
# - Swift's run-time exclusivity checks off in every module, SwiftNIO's included.
#   Package.swift turns them off for moonwire's own modules only (a package cannot set
#   its dependencies' flags); on the rtt path NIO's checks alone were about 45
#   swift_beginAccess calls and 5 000 instructions per message (docs/performance.md).
#   One event-loop thread runs each Lua state and its channels, and debug builds (the
#   tests, the AddressSanitizer runs) keep every check.
# - Thin link-time optimization (SwiftPM's --experimental-lto-mode=thin): the linker
#   inlines and drops code across modules, NIO's included. On the rtt client it took
#   the instructions per message from 15 610 to 14 252 and the level-1 instruction-cache
#   misses from 871 to 747; every measured row ran fewer instructions (docs/performance.md).
#   A full build takes about 12 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
exec swift build -c release --experimental-lto-mode=thin -Xswiftc -enforce-exclusivity=unchecked "$@"

#!/usr/bin/env bash
# Installs what moonwire needs to build and run on Debian 12, if it is missing:
# Lua 5.4 (headers and library), lua-luassert, pkg-config, libedit (the line
# editor of `connect` and `listen`), rapidjson-dev (mw.json's parser); with --test, also the
# peers the tests talk to, xmllint, jq, chromium and busted.
# Swift itself must already be on PATH (https://www.swift.org/install/linux/).
set -euo pipefail

need=()
pkg-config --exists lua5.4 2>/dev/null || need+=(liblua5.4-dev pkg-config)
[ -d /usr/share/lua/5.4/luassert ] || need+=(lua-luassert)
pkg-config --exists libedit 2>/dev/null || need+=(libedit-dev)
# RapidJSON (header-only): the parser under the native mw.json (Sources/CMoonJSON).
[ -f /usr/include/rapidjson/reader.h ] || need+=(rapidjson-dev)
# libprotobuf's .proto parser and descriptors (libprotoc-dev has the parser's headers):
# mw.protobuf (Sources/CMoonProto).
[ -f /usr/include/google/protobuf/compiler/importer.h ] || need+=(libprotobuf-dev libprotoc-dev)
# The test peers: Debian's node-ws, a venv for Python websockets, openssl for test certificates,
# mosquitto, tinyproxy and microsocks.
if [ "${1:-}" = "--test" ]; then
    [ -d /usr/share/nodejs/ws ] || need+=(node-ws nodejs)
    python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
    command -v openssl >/dev/null 2>&1 || need+=(openssl)
    # xmllint validates moonwire test's JUnit XML against its schema.
    command -v xmllint >/dev/null 2>&1 || need+=(libxml2-utils)
    # jq reads figures out of --summary-json files, as a CI script would.
    command -v jq >/dev/null 2>&1 || need+=(jq)
    # A real MQTT broker with a WebSocket listener, for examples/mqtt_ws.lua and moonwire.mqtt.
    [ -x /usr/sbin/mosquitto ] || need+=(mosquitto)
    # A real STOMP broker (Web-STOMP and TCP plugins bundled), for moonwire.stomp's tests.
    [ -x /usr/sbin/rabbitmq-server ] || need+=(rabbitmq-server)
    # Its real clients, against moonwire's MQTT broker stub (scripts/protocols/mqtt.sh).
    [ -x /usr/bin/mosquitto_sub ] || need+=(mosquitto-clients)
    # Real proxies for the proxy tests: tinyproxy (HTTP CONNECT), microsocks (SOCKS5).
    [ -x /usr/bin/tinyproxy ] || need+=(tinyproxy)
    [ -x /usr/bin/microsocks ] || need+=(microsocks)
    # Headless Chromium opens the HTML reports (moonwire report) in their tests.
    [ -x /usr/bin/chromium ] || need+=(chromium)
    # Debian's busted: the reference runner `moonwire test` is compared with
    # (TestCommandTests, scripts/busted_compat.sh).
    command -v busted >/dev/null 2>&1 || need+=(lua-busted)
    # luacheck 1.1: examples/ must lint clean with the std `moonwire init` writes.
    command -v luacheck >/dev/null 2>&1 || need+=(lua-check)
    # protoc writes the descriptor sets Python's protobuf reads in scripts/protobuf_diff.sh.
    command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
fi
if ! command -v swift >/dev/null 2>&1; then
    echo "moonwire: swift is not on PATH; install Swift 6 first (https://www.swift.org/install/linux/)" >&2
    exit 1
fi

if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "moonwire: installing ${need[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

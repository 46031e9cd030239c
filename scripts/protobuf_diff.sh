#!/usr/bin/env bash
# mw.protobuf against Python's protobuf (upb), both ways, on every kind of field
# (scripts/protobuf_diff/corpus.proto and legacy.proto; a few seconds):
#  1. Python writes random and edge-case messages of each type (diff.py gen);
#     moonwire must decode each to the value Python read and encode it back to the
#     bytes Python wrote with deterministic=True.
#  2. moonwire writes its own random messages (diff.lua); Python must read the
#     value moonwire read and write the same bytes again (diff.py check).
# usage: scripts/protobuf_diff.sh [MOONWIRE_BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-${MOONWIRE_BIN:-$(swift build --show-bin-path)/moonwire}}
python=$(Tests/MoonwireCoreTests/Peers/setup_venv.sh)
dir=scripts/protobuf_diff
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
protoc -I "$dir" --include_imports --descriptor_set_out="$work/corpus.pb" corpus.proto legacy.proto
"$python" "$dir/diff.py" gen "$work/corpus.pb" "$work/python_cases.txt"
"$bin" run "$dir/diff.lua" "$dir" "$work/python_cases.txt" "$work/moonwire_cases.txt"
"$python" "$dir/diff.py" check "$work/corpus.pb" "$work/moonwire_cases.txt"
# The fuzz target's seeds and kept crashes, through the same checks.
shopt -s nullglob
"$bin" run scripts/protobuf_diff/replay.lua Fuzz/corpus/protobuf/* Fuzz/crashes/protobuf-*
# `connect --proto`: typed lines (JSON or a Lua table) encoded, replies shown decoded.
mkfifo "$work/server.out"
"$bin" run scripts/protobuf_diff/echo_server.lua > "$work/server.out" &
server=$!
exec 3< "$work/server.out"
read -r url <&3
got=$(printf '%s\n' '{"id": 1, "login": {"user": "ann"}}' '{ id = 2, say = { text = "hi", tags = { "a" } } }' \
    | "$bin" connect --proto examples/chat.proto --type chat.Envelope "$url" 2>/dev/null)
wait "$server"
exec 3<&-
want='{ id = 1, meta = {}, welcome = { session = -1, user = "ann" } }
{ id = 2, meta = {}, say = { tags = { "a" }, text = "hi" } }'
[ "$got" = "$want" ] || { printf 'connect --proto printed:\n%s\nexpected:\n%s\n' "$got" "$want" >&2; exit 1; }
echo "connect --proto: lines encoded, replies decoded"

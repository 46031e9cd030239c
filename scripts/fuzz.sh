#!/usr/bin/env bash
# Runs one libFuzzer target under AddressSanitizer for a while.
#
#   scripts/fuzz.sh TARGET [SECONDS]     # default 600 s
#   scripts/fuzz.sh --list               # the targets
#   scripts/fuzz.sh --regress            # every target once over its corpus and crashes (CI)
#   scripts/fuzz.sh --merge TARGET       # fold what runs found into Fuzz/corpus/TARGET, minimized
#
# Targets: ws-client, ws-server, ws-client-deflate, ws-server-deflate (frame parser +
# message assembler per role, with and without permessage-deflate), http-request,
# http-response (the upgrade handshake through the server's and client's pipelines),
# tcp-line, tcp-delimiter, tcp-fixed, tcp-length (the TCP framing decoders), lua-json
# (mw.json: values built from the input through encode and decode, and decode of the
# raw input), lua-msgpack and lua-cbor (mw.msgpack and mw.cbor: decode of the raw
# input, and what decodes re-encodes to a fixed point), protobuf (mw.protobuf's decoder
# on any bytes as each type of scripts/protobuf_diff's corpus, and the round trip of
# what it decodes).
#
# Builds Fuzz/MoonwireFuzz optimized (-c release) with -sanitize=fuzzer,address (C and
# C++ too: the native mw.json is checked and coverage-guided like the Swift code) in
# .build-fuzz (its own scratch path; the first build takes ~15 minutes). Optimized
# code runs the targets 2.6 to 14 times as fast as a debug build (docs/conformance.md),
# and AddressSanitizer still checks every access. Seeds: Fuzz/corpus/TARGET (in
# the repository); new inputs libFuzzer finds go to .build-fuzz/corpus/TARGET; a
# crash is written to Fuzz/crashes/TARGET-<hash> so it can be kept as a regression
# input (--regress replays every file there). --merge adds to Fuzz/corpus/TARGET the
# fewest found inputs that reach what the seeds do not (libFuzzer -merge=1).
#
# MOONWIRE_FUZZ_BIN=PATH runs that binary instead of building (a copy of a build, so that
# runs go on while the sources change).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
targets="ws-client ws-server ws-client-deflate ws-server-deflate http-request http-response tcp-line tcp-delimiter tcp-fixed tcp-length lua-json lua-msgpack lua-cbor protobuf"
die() { echo "fuzz: $*" >&2; exit 2; }
# A failed check (fatalError) goes straight to libFuzzer's crash report; Swift's own
# backtracer would read memory AddressSanitizer forbids and report itself instead.
export SWIFT_BACKTRACE=enable=no
case "${1:-}" in
    ""|-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --list) tr ' ' '\n' <<<"$targets"; exit 0 ;;
esac

build() {
    if [ -n "${MOONWIRE_FUZZ_BIN:-}" ]; then bin="$MOONWIRE_FUZZ_BIN"; return; fi
    echo "fuzz: building moonwire-fuzz in .build-fuzz" >&2
    MOONWIRE_FUZZ=1 swift build -c release --product moonwire-fuzz --scratch-path .build-fuzz \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing \
        -Xcc -fsanitize=fuzzer-no-link,address -Xcxx -fsanitize=fuzzer-no-link,address >&2
    bin="$(MOONWIRE_FUZZ=1 swift build -c release --product moonwire-fuzz --scratch-path .build-fuzz --show-bin-path)/moonwire-fuzz"
}

if [ "$1" = --regress ]; then
    build
    for t in $targets; do
        inputs=()
        [ -d "Fuzz/corpus/$t" ] && inputs+=("Fuzz/corpus/$t"/*)
        for c in Fuzz/crashes/"$t"-*; do [ -e "$c" ] && inputs+=("$c"); done
        [ ${#inputs[@]} -gt 0 ] || continue
        echo "fuzz: $t: ${#inputs[@]} inputs" >&2
        MOONWIRE_FUZZ_TARGET="$t" "$bin" -runs=0 "${inputs[@]}" >/dev/null 2>"/tmp/fuzz-regress-$t.log" \
            || { tail -30 "/tmp/fuzz-regress-$t.log" >&2; die "$t failed on a kept input"; }
    done
    echo "fuzz: every kept input passes" >&2
    exit 0
fi

if [ "$1" = --merge ]; then
    target="${2:-}"
    grep -qw -- "$target" <<<"$targets" || die "unknown target '$target' (try --list)"
    build
    mkdir -p ".build-fuzz/corpus/$target" "Fuzz/corpus/$target"
    before=$(ls "Fuzz/corpus/$target" | wc -l)
    MOONWIRE_FUZZ_TARGET="$target" "$bin" -merge=1 -max_len=4096 -rss_limit_mb=1024 \
        "Fuzz/corpus/$target" ".build-fuzz/corpus/$target" 2>"/tmp/fuzz-merge-$target.log" \
        || { tail -30 "/tmp/fuzz-merge-$target.log" >&2; die "$target: merge failed"; }
    echo "fuzz: $target: $before seeds + $(( $(ls "Fuzz/corpus/$target" | wc -l) - before )) found inputs, $(du -sh "Fuzz/corpus/$target" | cut -f1)" >&2
    exit 0
fi

target="$1" seconds="${2:-600}"
grep -qw -- "$target" <<<"$targets" || die "unknown target $target (try --list)"
build
mkdir -p ".build-fuzz/corpus/$target" Fuzz/crashes
seeds=(); [ -d "Fuzz/corpus/$target" ] && seeds=("Fuzz/corpus/$target")
dict=(); [ -f "Fuzz/dict/${target%%-*}.dict" ] && dict=(-dict="Fuzz/dict/${target%%-*}.dict")
# The Lua state lives across inputs, so its allocations never balance per input and
# libFuzzer's leak check (a heap scan after each new input) would find nothing but cost time.
leaks=(); [ "${target%%-*}" = lua ] && leaks=(-detect_leaks=0)
echo "fuzz: $target for ${seconds}s" >&2
MOONWIRE_FUZZ_TARGET="$target" "$bin" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=1024 \
    -print_final_stats=1 -artifact_prefix="Fuzz/crashes/$target-" "${dict[@]}" "${leaks[@]}" \
    ".build-fuzz/corpus/$target" "${seeds[@]}"

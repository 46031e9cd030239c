#!/usr/bin/env bash
# Runs Debian's busted and `moonwire test` over one spec folder and prints, per
# file, the passed/failed/errors/pending counts of each runner, then whether
# they agree (exit 0) or not (exit 1).
#
#   scripts/busted_compat.sh DIR [OPTION...]   # e.g. a checkout of luassert's spec/
#
# OPTIONs (such as --tags fast) go to both runners.
# Both run from DIR's parent folder (so `require "spec.helper"` and a .busted
# file there work for both) over the files whose name matches PATTERN
# (default _spec, busted's). MOONWIRE names the binary (default: the debug
# build of this checkout). Needs busted (lua-busted) and python3.
set -euo pipefail
dir=${1:?usage: scripts/busted_compat.sh DIR [OPTION...]}
shift
[ -d "$dir" ] || { echo "busted_compat: no folder $dir" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
moonwire=${MOONWIRE:-$root/.build/debug/moonwire}
pattern=${PATTERN:-_spec}
command -v busted >/dev/null || { echo "busted_compat: busted is not installed (apt-get install lua-busted)" >&2; exit 2; }
[ -x "$moonwire" ] || { echo "busted_compat: no moonwire binary at $moonwire (swift build, or set MOONWIRE)" >&2; exit 2; }

parent=$(cd "$(dirname "$dir")" && pwd)
name=$(basename "$dir")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Both write JUnit XML (busted's JSON handler crashes on a declared pending
# test; its JUnit one does not). Both exit 1 when a test fails: the counts say so.
(cd "$parent" && busted -o junit -p "$pattern" "$@" "$name" >"$tmp/busted.xml" 2>"$tmp/busted.err") || true
(cd "$parent" && "$moonwire" test -o junit -p "$pattern" "$@" "$name" >"$tmp/moonwire.xml" 2>"$tmp/moonwire.err") || true

python3 - "$tmp/busted.xml" "$tmp/moonwire.xml" <<'PY'
import os, sys
import xml.etree.ElementTree as ET

def counts(path):
    text = open(path, encoding="utf-8", errors="replace").read().strip()
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        err = open(path[:-4] + ".err").read() if os.path.exists(path[:-4] + ".err") else ""
        sys.exit(f"busted_compat: no JUnit XML from {os.path.basename(path)[:-4]}: {(text or err)[:400]}")
    out = {}
    for case in root.iter("testcase"):
        # moonwire: file="..."; busted: classname="file:line".
        f = case.get("file") or case.get("classname", "?").rsplit(":", 1)[0]
        col = 0
        if case.find("failure") is not None: col = 1
        elif case.find("error") is not None: col = 2
        elif case.find("skipped") is not None: col = 3
        out.setdefault(os.path.normpath(f), [0, 0, 0, 0])[col] += 1
    return out
b, m = counts(sys.argv[1]), counts(sys.argv[2])
files = sorted(set(b) | set(m))
width = max([len(f) for f in files] + [4])
print(f"| {'file':<{width}} | busted p/f/e/pending | moonwire p/f/e/pending | same |")
print(f"|{'-' * (width + 2)}|---------------------|-----------------------|------|")
same_all = True
def fmt(c): return "/".join(str(x) for x in c)
for f in files:
    bc, mc = b.get(f, [0, 0, 0, 0]), m.get(f, [0, 0, 0, 0])
    same = bc == mc
    same_all &= same
    print(f"| {f:<{width}} | {fmt(bc):<19} | {fmt(mc):<21} | {'yes' if same else 'NO'}  |")
tb = [sum(c[i] for c in b.values()) for i in range(4)]
tm = [sum(c[i] for c in m.values()) for i in range(4)]
print(f"| {'total':<{width}} | {fmt(tb):<19} | {fmt(tm):<21} | {'yes' if tb == tm else 'NO'}  |")
sys.exit(0 if same_all else 1)
PY

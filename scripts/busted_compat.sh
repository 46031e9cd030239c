#!/usr/bin/env bash
# Runs Debian's busted and `moonwire test` over one spec folder and prints, per
# file, the passed/failed/errors/pending counts of each runner, then whether
# they agree (exit 0) or not (exit 1).
#
#   scripts/busted_compat.sh DIR [OPTION...]   # e.g. a checkout of luassert's spec/
#   scripts/busted_compat.sh --as-configured DIR
#
# OPTIONs (such as --tags fast) go to both runners.
# Both run from DIR's parent folder (so `require "spec.helper"` and a .busted
# file there work for both) over the files whose name matches PATTERN
# (default _spec, busted's), writing JUnit XML.
#
# --as-configured: both run in DIR itself with no options at all, as its
# .busted file says (its output handler, ROOT, pattern, helper...), the way
# a user types `busted` and `moonwire test` in a checkout. Their outputs
# (busted's gtest or junit) are read back, and the script compares the counts
# per file and the outcome of every test (file, line, name), listing those
# that differ.
#
# MOONWIRE names the binary (default: the debug build of this checkout).
# Needs busted (lua-busted) and python3.
set -euo pipefail
as_configured=0
if [ "${1:-}" = --as-configured ]; then
  as_configured=1
  shift
fi
dir=${1:?usage: scripts/busted_compat.sh [--as-configured] DIR [OPTION...]}
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
if [ "$as_configured" = 1 ]; then
  [ -f "$dir/.busted" ] || { echo "busted_compat: --as-configured needs a .busted file in $dir" >&2; exit 2; }
  (cd "$dir" && busted >"$tmp/busted.out" 2>"$tmp/busted.err") || true
  (cd "$dir" && "$moonwire" test >"$tmp/moonwire.out" 2>"$tmp/moonwire.err") || true
else
  (cd "$parent" && busted -o junit -p "$pattern" "$@" "$name" >"$tmp/busted.out" 2>"$tmp/busted.err") || true
  (cd "$parent" && "$moonwire" test -o junit -p "$pattern" "$@" "$name" >"$tmp/moonwire.out" 2>"$tmp/moonwire.err") || true
fi

python3 - "$tmp/busted.out" "$tmp/moonwire.out" <<'PY'
import os, re, sys
import xml.etree.ElementTree as ET

STATUS = {"OK": 0, "FAILED": 1, "ERROR": 2, "SKIPPED": 3}

def tests(path):
    """Every test as (file, line, name) -> column (0 passed, 1 failed, 2 error, 3 pending),
    from busted's gtest lines or from JUnit XML."""
    text = open(path, encoding="utf-8", errors="replace").read()
    runner = os.path.basename(path)[:-4]
    out = {}
    if text.lstrip().startswith("[=========="):
        # "[  FAILED  ] spec/a_spec.lua @ 4: outer fails (0.36 ms)", colours taken off.
        plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
        for status, f, line, name in re.findall(r"^\[ *(OK|FAILED|ERROR|SKIPPED) *\] (.+?) @ (\d+): (.*) \([0-9.]+ ms\)$", plain, re.M):
            out[(os.path.normpath(f), int(line), name)] = STATUS[status]
        return out
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError:
        err = open(path[:-4] + ".err").read() if os.path.exists(path[:-4] + ".err") else ""
        sys.exit(f"busted_compat: neither gtest lines nor JUnit XML from {runner}: {(text.strip() or err)[:400]}")
    for case in root.iter("testcase"):
        # moonwire: file="..." line="..."; busted: classname="file:line".
        f, line = case.get("file"), case.get("line")
        if not f:
            f, _, line = case.get("classname", "?").rpartition(":")
        col = 0
        if case.find("failure") is not None: col = 1
        elif case.find("error") is not None: col = 2
        elif case.find("skipped") is not None: col = 3
        out[(os.path.normpath(f), int(line or 0), case.get("name", ""))] = col
    return out

def counts(t):
    out = {}
    for (f, _, _), col in t.items():
        out.setdefault(f, [0, 0, 0, 0])[col] += 1
    return out
bt, mt = tests(sys.argv[1]), tests(sys.argv[2])
b, m = counts(bt), counts(mt)
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
names = ["passed", "failed", "error", "pending", "not run"]
differ = sorted(k for k in set(bt) | set(mt) if bt.get(k, 4) != mt.get(k, 4))
print(f"tests: {len(bt)} under busted, {len(mt)} under moonwire, {len(differ)} with another outcome")
for f, line, name in differ:
    print(f"  {f}:{line}: {name}: busted {names[bt.get((f, line, name), 4)]}, moonwire {names[mt.get((f, line, name), 4)]}")
sys.exit(0 if same_all and not differ else 1)
PY

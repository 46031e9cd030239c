#!/usr/bin/env python3
"""Docs that show a complete example file show it as it is: in docs/**/*.md, a code
block right after a line ending in (`examples/....lua`): (or any other repository
path in backquotes followed by a colon) must equal that file. Prints one line per
mismatch and "doc examples: N passed, N failed"; exits 1 on any mismatch."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
cite = re.compile(r"\(`([\w./-]+\.(?:lua|proto|py|sh))`\):\s*$")
passed = failed = 0
for doc in sorted((root / "docs").rglob("*.md")):
    lines = doc.read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines):
        m = cite.search(line)
        if not m:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or not lines[j].startswith("```"):
            continue
        k = j + 1
        while k < len(lines) and not lines[k].startswith("```"):
            k += 1
        shown = "\n".join(lines[j + 1:k]).rstrip("\n")
        path = root / m.group(1)
        where = f"{doc.relative_to(root)}:{i + 1}"
        if not path.is_file():
            print(f"{where}: shows {m.group(1)}, which does not exist")
            failed += 1
        elif path.read_text(encoding="utf-8").rstrip("\n") != shown:
            print(f"{where}: the block differs from {m.group(1)}")
            failed += 1
        else:
            passed += 1
print(f"doc examples: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)

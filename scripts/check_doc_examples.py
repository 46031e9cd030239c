#!/usr/bin/env python3
"""Docs that show a complete example file show it as it is: in docs/**/*.md, a code
block right after a line that names a file of examples/, scripts/ or bench/ (in
backquotes or as a link) and ends in a colon must equal that file. Prints one line per
mismatch and "doc examples: N passed, N failed"; exits 1 on any mismatch."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
# The line before the block names the file (the last one it names), in backquotes or as
# a link, and ends in ":".
cite = re.compile(r".*[`\[(]((?:\.\./)*(?:examples|scripts|bench)/[\w./-]+\.(?:lua|proto|py|sh))[`\])][^`\[(]*:\s*$")
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
        # Only a block in the file's own language shows the file (a bare ``` is output).
        language = {"lua": ("lua",), "py": ("python", "py"), "sh": ("sh", "bash"), "proto": ("proto", "protobuf")}
        if j >= len(lines) or lines[j][3:].strip() not in language[m.group(1).rsplit(".", 1)[1]]:
            continue
        k = j + 1
        while k < len(lines) and not lines[k].startswith("```"):
            k += 1
        shown = "\n".join(lines[j + 1:k]).rstrip("\n")
        path = root / re.sub(r"^(?:\.\./)+", "", m.group(1))
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

#!/usr/bin/env python3
"""Writes the option tables of mw.connect and mw.listen into docs/scripting.md.

The tables are derived from the options' declarations (Sources/MoonwireLua/
SessionOptions.swift), which `moonwire defs --options` prints; in the doc each sits
between `<!-- options: mw.connect -->` (or mw.listen) and `<!-- /options -->`.
DefinitionsTests holds the doc against the declarations, so after changing an option
run this (with a built moonwire: scripts/option_docs.py [path/to/moonwire]).
"""
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parent.parent
binary = sys.argv[1] if len(sys.argv) > 1 else subprocess.run(
    ["swift", "build", "--show-bin-path"], cwd=root, check=True, capture_output=True, text=True
).stdout.strip() + "/moonwire"
generated = subprocess.run([binary, "defs", "--options"], check=True, capture_output=True, text=True).stdout
blocks = dict(re.findall(r"(<!-- options: [\w.]+ -->)\n(.*?<!-- /options -->\n)", generated, re.S))
doc = root / "docs" / "scripting.md"
text = doc.read_text()
for start, block in blocks.items():
    pattern = re.escape(start) + r"\n.*?<!-- /options -->\n"
    if not re.search(pattern, text, re.S):
        sys.exit(f"docs/scripting.md has no {start} ... <!-- /options --> block")
    text = re.sub(pattern, lambda _: start + "\n" + block, text, flags=re.S)
doc.write_text(text)
print(f"wrote {len(blocks)} option tables into docs/scripting.md")

#!/usr/bin/env python3
"""Checks that README code blocks equal the example files they claim to show, byte for byte.

A block is claimed by a marker line right before its opening fence:

    <!-- example: examples/writer.cpp -->
    ```cpp
    ...the file's exact contents...
    ```

usage: check_readme.py README.md FILE...   (FILE relative to the README's folder; each must be shown)
"""
import pathlib
import re
import sys

MARKER = re.compile(r"<!-- example: (\S+) -->\n(`{3,})[^\n]*\n")


def main() -> int:
    readme = pathlib.Path(sys.argv[1])
    root = readme.parent
    text = readme.read_bytes().decode("utf-8")
    shown = {}
    failures = []
    for m in MARKER.finditer(text):
        path, fence = m.group(1), m.group(2)
        end = text.find("\n" + fence + "\n", m.end() - 1)
        if end < 0:
            failures.append(f"{path}: the block after its marker is not closed by {fence}")
            continue
        block = text[m.end():end + 1]  # the file's text, its final newline included
        if path in shown:
            failures.append(f"{path}: shown twice")
        shown[path] = block
        if not (root / path).is_file():
            failures.append(f"{path}: shown in {readme.name}, but there is no such file")
            continue
        wanted = (root / path).read_bytes().decode("utf-8")
        if block != wanted:
            got, want = block.splitlines(), wanted.splitlines()
            line = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            failures.append(f"{path}: the README's block differs from the file, first at line {line + 1}:\n"
                            f"  README: {got[line] if line < len(got) else '<end>'!r}\n"
                            f"  file:   {want[line] if line < len(want) else '<end>'!r}")
    for path in sys.argv[2:]:
        if path not in shown:
            failures.append(f"{path}: not shown in {readme} (no '<!-- example: {path} -->' marker)")
    for f in failures:
        print("FAILED:", f)
    if not failures:
        print(f"{readme.name}: {', '.join(sorted(shown))} shown verbatim")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

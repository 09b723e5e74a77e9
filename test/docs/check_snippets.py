#!/usr/bin/python3
"""Checks that every snippet in a document is byte for byte the file it names.

A snippet is a fenced code block right after a line
    <!-- snippet: path/relative/to/the/source/root -->
The files are compiled and run by the tests, so a snippet that matches its
file is known to build. `--update` rewrites the document's blocks from the files.

    check_snippets.py SOURCE_ROOT DOC [--update]
"""
import difflib
import pathlib
import re
import sys

MARK = re.compile(r"^<!-- snippet: (\S+) -->$")


def blocks(lines):
    """Yields (path, first line index of the body, index of the closing fence)."""
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if m:
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                raise SystemExit(f"line {i + 1}: snippet marker for {m.group(1)} is not followed by a code fence")
            end = i + 2
            while end < len(lines) and lines[end] != "```":
                end += 1
            if end == len(lines):
                raise SystemExit(f"line {i + 2}: code fence for {m.group(1)} is never closed")
            yield m.group(1), i + 2, end
            i = end
        i += 1


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    root, doc = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    update = sys.argv[3:] == ["--update"]
    lines = doc.read_text().split("\n")
    found = list(blocks(lines))
    if not found:
        raise SystemExit(f"{doc}: no snippets found")
    failures = 0
    for path, start, end in reversed(found):
        want = (root / path).read_text().rstrip("\n").split("\n")
        have = lines[start:end]
        if have == want:
            continue
        if update:
            lines[start:end] = want
            continue
        failures += 1
        print(f"{doc}: the snippet of {path} differs from the file:")
        sys.stdout.writelines(l + "\n" for l in difflib.unified_diff(want, have, path, str(doc), lineterm=""))
    if update:
        doc.write_text("\n".join(lines))
        print(f"{doc}: {len(found)} snippets written from their files")
        return 0
    print(f"{doc}: {len(found) - failures} of {len(found)} snippets match their files")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

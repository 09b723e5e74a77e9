#!/usr/bin/python3
"""The layering of lib/ (docs/design.md, "Layers"), checked from the sources.

1. The graph of #include "folder/..." between lib/ folders has no cycle.
2. Every such include points down: the included folder's level (its meson.build
   compiles it with -DTETHER_LAYER_LEVEL=N) is at most the includer's.
3. Every header in lib/ declares TETHER_LAYER(level, "folder") matching its folder.
4. The compile-time guard works: a translation unit of the link layer that
   includes a core header fails to compile, naming the upward include.

Usage: layers_check.py SOURCE_ROOT [C++ compiler command ...]
"""
import os
import re
import subprocess
import sys
import tempfile

root = sys.argv[1]
compiler = sys.argv[2:]
lib = os.path.join(root, "lib")
failures = []

levels = {}
for d in sorted(os.listdir(lib)):
    mb = os.path.join(lib, d, "meson.build")
    if os.path.isfile(mb):
        m = re.search(r"-DTETHER_LAYER_LEVEL=(\d+)", open(mb).read())
        if m:
            levels[d] = int(m.group(1))
print("layers:", ", ".join(f"{d}={n}" for d, n in sorted(levels.items(), key=lambda x: x[1])))

edges = {}
for d in levels:
    for dirpath, _, files in os.walk(os.path.join(lib, d)):
        for f in files:
            if not f.endswith((".cpp", ".hpp", ".h", ".c")):
                continue
            path = os.path.join(dirpath, f)
            text = open(path, errors="replace").read()
            for target in re.findall(r'#include\s+"([^"/]+)/', text):
                if target == d or target not in levels:
                    continue
                edges.setdefault(d, set()).add(target)
                if levels[target] > levels[d]:
                    failures.append(f"{os.path.relpath(path, root)} includes {target}/ (level {levels[target]}) "
                                    f"from {d}/ (level {levels[d]}): upward")
            if f.endswith((".hpp", ".h")) and path != os.path.join(lib, "base", "layer.hpp"):
                m = re.search(r'TETHER_LAYER\((\d+), "([a-z]+)"\)', text)
                if not m:
                    failures.append(f"{os.path.relpath(path, root)}: no TETHER_LAYER(level, name) line")
                elif int(m.group(1)) != levels[d] or m.group(2) != d:
                    failures.append(f"{os.path.relpath(path, root)}: TETHER_LAYER({m.group(1)}, \"{m.group(2)}\") "
                                    f"but the folder is {d} (level {levels[d]})")

# Cycle search (depth-first, colours).
state, stack = {}, []
def visit(u):
    state[u] = 1
    stack.append(u)
    for v in sorted(edges.get(u, ())):
        if state.get(v) == 1:
            return stack[stack.index(v):] + [v]
        if not state.get(v):
            c = visit(v)
            if c:
                return c
    state[u] = 2
    stack.pop()
    return None
for u in sorted(edges):
    if not state.get(u):
        cycle = visit(u)
        if cycle:
            failures.append("include cycle: " + " -> ".join(cycle))
            break
print("include edges:", "; ".join(f"{u} -> {', '.join(sorted(v))}" for u, v in sorted(edges.items())))

# 5. docs/design.md's layer table is the build's.
design = os.path.join(root, "docs", "design.md")
if os.path.isfile(design):
    text = open(design).read()
    m = re.search(r"<!-- layers:.*?-->(.*?)<!-- /layers -->", text, re.S)
    if not m:
        failures.append("docs/design.md has no <!-- layers --> table")
    else:
        rows = {}
        for line in m.group(1).splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and cells[0].isdigit():
                rows[cells[1]] = int(cells[0])
        if rows != levels:
            failures.append(f"docs/design.md's layer table {sorted(rows.items())} differs from the build's "
                            f"{sorted(levels.items())}")
        else:
            print("docs/design.md: layer table matches the build")

if compiler:
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "upward.cpp")
        with open(src, "w") as f:
            f.write('#include "core/world.hpp"\n')
        cmd = compiler + ["-std=c++20", "-fsyntax-only", "-DTETHER_LAYER_LEVEL=3",
                          "-I" + os.path.join(root, "include"), "-I" + lib, src]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0 or "upward include" not in r.stderr:
            failures.append("a link-layer unit including core/world.hpp compiled (the guard did not fire):\n"
                            + r.stderr[-2000:])
        else:
            print("guard: a link-layer unit including core/world.hpp fails to compile:",
                  next(l for l in r.stderr.splitlines() if "upward include" in l).strip())

if failures:
    print("\n".join("FAIL: " + f for f in failures))
    sys.exit(1)
print("layering ok")

#!/usr/bin/python3
"""The layering of lib/ and include/tether/detail (docs/design.md, "Layers"), checked from the sources.

1. The graph of includes between layers has no cycle: #include "folder/..." between lib/
   folders, and the "tether/..." includes of lib/ files and of include/tether/detail headers.
2. Every such include points down: the included header's level is at most the includer's.
   A lib/ folder's level is what its meson.build compiles it with (-DTETHER_LAYER_LEVEL=N).
   A "tether/..." header's level:
     tether/detail/<layer>/*  that layer's (<layer> one of the lib folders: base, wire, ...);
     tether/detail/*.hpp      base's;
     tether/<layer>/*         (e.g. tether/rdma/) the public API of that layer: its level, at least core's;
     other tether/* headers   the public API: core's level, so only core and the layers above it
                              include them; except VOCABULARY below (defined by a lower layer).
   A header in include/tether/detail/<layer>/ (or detail/ itself: base) has that level as includer.
   KNOWN lists upward includes found when this check learnt to see tether/ includes that are
   not fixed yet: printed, not failed; one that no longer occurs is printed as stale.
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

# Public headers that a layer below core defines (their out-of-line parts live there)
# and that include no tether header above it: every layer may use them.
VOCABULARY = {
    "tether/error.hpp": "base",  # lib/base/error.cpp
    "tether/log.hpp": "base",  # lib/base/log.cpp
}
# Upward includes known when the tether/ includes became visible, each with its way out.
# (Empty since issue 24: lib/base/settings.cpp no longer includes coll's
# settings and algorithm table; TETHER_ALGO is text there, checked by coll.)
KNOWN = {}
include_dir = os.path.join(root, "include")
detail = os.path.join(include_dir, "tether", "detail")
core_level = levels.get("core", max(levels.values()) if levels else 0)


def tether_level(header):
    """(level, layer name) of an include "tether/..." by the rules above."""
    parts = header.split("/")
    if parts[:2] == ["tether", "detail"]:
        if len(parts) == 3:
            return levels.get("base", 0), "base"
        if parts[2] in levels:
            return levels[parts[2]], parts[2]
        return None, None  # a detail folder that is no layer: reported below
    if header in VOCABULARY:
        return levels[VOCABULARY[header]], VOCABULARY[header]
    if len(parts) > 2 and parts[1] in levels:  # tether/rdma/*: the rdma layer's public API
        return max(core_level, levels[parts[1]]), parts[1]
    return core_level, "public"


def includer_layer(path):
    """(level, layer name) of a file in lib/<layer>/ or include/tether/detail[/<layer>]/."""
    rel = os.path.relpath(path, root).split(os.sep)
    if rel[0] == "lib":
        return levels[rel[1]], rel[1]
    if len(rel) == 4:
        return levels.get("base", 0), "base"
    return levels.get(rel[3], None), rel[3]


edges = {}
seen_known = set()


def check_tether_includes(path, text):
    level, layer = includer_layer(path)
    rel = os.path.relpath(path, root)
    if level is None:
        failures.append(f"{rel}: include/tether/detail/{layer}/ is not a layer (one of {', '.join(levels)})")
        return
    for target in re.findall(r'#include\s+["<](tether/[^">]+)[">]', text):
        t_level, t_layer = tether_level(target)
        if t_level is None:
            failures.append(f"{rel} includes {target}: {target.split('/')[2]}/ is not a layer")
            continue
        if t_level > level and (rel, target) in KNOWN:
            seen_known.add((rel, target))
            continue  # nor an edge: it would close a cycle through the allowed include
        if t_layer != layer and t_layer != "public":
            edges.setdefault(layer, set()).add(t_layer)
        if t_level > level:
            failures.append(f"{rel} includes {target} ({t_layer}, level {t_level}) from {layer} "
                            f"(level {level}): upward")


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
            check_tether_includes(path, text)
            if f.endswith((".hpp", ".h")) and path != os.path.join(lib, "base", "layer.hpp"):
                m = re.search(r'TETHER_LAYER\((\d+), "([a-z]+)"\)', text)
                if not m:
                    failures.append(f"{os.path.relpath(path, root)}: no TETHER_LAYER(level, name) line")
                elif int(m.group(1)) != levels[d] or m.group(2) != d:
                    failures.append(f"{os.path.relpath(path, root)}: TETHER_LAYER({m.group(1)}, \"{m.group(2)}\") "
                                    f"but the folder is {d} (level {levels[d]})")

detail_headers = 0
for dirpath, _, files in os.walk(detail):
    for f in files:
        if f.endswith((".hpp", ".h")):
            path = os.path.join(dirpath, f)
            check_tether_includes(path, open(path, errors="replace").read())
            detail_headers += 1
print(f"include/tether/detail: {detail_headers} headers checked")
for header, layer in VOCABULARY.items():  # a vocabulary header stays a leaf of its layer
    path = os.path.join(include_dir, header)
    if not os.path.isfile(path):
        failures.append(f"VOCABULARY names {header}, which does not exist")
        continue
    for target in re.findall(r'#include\s+["<](tether/[^">]+)[">]', open(path).read()):
        if tether_level(target)[0] is None or tether_level(target)[0] > levels[layer]:
            failures.append(f"{header} (vocabulary of {layer}) includes {target}, above {layer}")
for (rel, target), why in sorted(KNOWN.items()):
    if (rel, target) in seen_known:
        print(f"known upward include, not failed: {rel} includes {target}: {why}")
    else:
        print(f"stale KNOWN entry (no longer found; remove it): {rel} includes {target}")

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

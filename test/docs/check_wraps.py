#!/usr/bin/python3
"""Every dependency() in tether's meson.build files can fall back to a wrap: a
subprojects/*.wrap whose [provide] section provides it (by name, or the variable an
explicit fallback: ['wrap', 'var'] names), so `meson setup` works on a system without
those packages. Exempt: what must come from the system (Boost, OpenSSL's libcrypto,
libibverbs, PMIx; README.md says so), what Meson itself provides (threads, dl), and
optional ones (required: false). The wraps themselves: WrapDB's form, a 64-hex sha256,
an existing packagefiles/ build, and each one used. Usage: check_wraps.py SOURCE_ROOT"""
import configparser
import os
import re
import sys

SYSTEM = {"boost", "libcrypto", "libibverbs", "pmix"}  # README.md: from the system
BUILTIN = {"threads", "dl"}                            # Meson's own

root = sys.argv[1]
sub = os.path.join(root, "subprojects")
failures = []


def call_args(text, start):
    """The text between the parenthesis at text[start] and its match."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
    return text[start + 1:]


# The wraps: name -> {dependency name -> variable}.
wraps = {}
for name in sorted(os.listdir(sub)) if os.path.isdir(sub) else []:
    if not name.endswith(".wrap"):
        continue
    path = os.path.join("subprojects", name)
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(os.path.join(sub, name))
    if not cfg.has_section("wrap-file"):
        failures.append(f"{path}: no [wrap-file] section")
        continue
    w = cfg["wrap-file"]
    for key in ("directory", "source_url", "source_filename", "source_hash"):
        if key not in w:
            failures.append(f"{path}: [wrap-file] has no {key}")
    if not re.fullmatch(r"[0-9a-f]{64}", w.get("source_hash", "").strip()):
        failures.append(f"{path}: source_hash is not a sha256: {w.get('source_hash')!r}")
    patch = w.get("patch_directory")
    if patch and not os.path.isfile(os.path.join(sub, "packagefiles", patch, "meson.build")):
        failures.append(f"{path}: patch_directory {patch} has no subprojects/packagefiles/{patch}/meson.build")
    provided = {}
    if cfg.has_section("provide"):
        for key, value in cfg["provide"].items():
            if key == "dependency_names":
                provided.update({n.strip().lower(): None for n in value.split(",")})
            else:
                provided[key.lower()] = value.strip()
    if not provided:
        failures.append(f"{path}: no [provide] entry")
    wraps[name[:-5]] = provided

used = set()
checked = []
for dirpath, dirnames, filenames in os.walk(root):
    rel = os.path.relpath(dirpath, root)
    # Build trees, the wraps' own builds, and the separate parent project of the
    # subproject test (it consumes tether, it is not tether).
    dirnames[:] = [d for d in dirnames if not d.startswith((".", "build"))
                   and os.path.join(rel, d) not in ("subprojects", os.path.join("test", "subproject"))]
    if "meson.build" not in filenames:
        continue
    path = os.path.normpath(os.path.join(rel, "meson.build"))
    text = open(os.path.join(dirpath, "meson.build")).read()
    text = re.sub(r"#[^\n]*", "", text)
    for m in re.finditer(r"(?<![\w.])dependency\s*(?=\()", text):
        args = call_args(text, m.end())
        line = text.count("\n", 0, m.start()) + 1
        name_m = re.match(r"\s*'([^']*)'", args)
        if not name_m:
            failures.append(f"{path}:{line}: dependency() without a literal name")
            continue
        dep = name_m.group(1)
        if dep == "" or dep.lower() in SYSTEM | BUILTIN:
            continue
        if re.search(r"\brequired\s*:\s*false\b", args):
            continue
        checked.append(f"{path}:{line}: {dep}")
        fb = re.search(r"\bfallback\s*:\s*\[\s*'([^']+)'\s*,\s*'([^']+)'\s*\]", args)
        if fb:
            wrap, var = fb.groups()
            if wrap not in wraps:
                failures.append(f"{path}:{line}: dependency('{dep}') falls back to {wrap}, "
                                f"but there is no subprojects/{wrap}.wrap")
            elif var not in wraps[wrap].values():
                failures.append(f"{path}:{line}: dependency('{dep}') falls back to {wrap}'s {var}, "
                                f"which subprojects/{wrap}.wrap does not [provide]")
            used.add(wrap)
            continue
        by = [w for w, p in wraps.items() if dep.lower() in p]
        if not by:
            failures.append(f"{path}:{line}: dependency('{dep}') has no wrap in subprojects/ "
                            f"that provides it (nor is it one the system must provide: "
                            f"{', '.join(sorted(SYSTEM))})")
        used.update(by)

for wrap in sorted(set(wraps) - used):
    failures.append(f"subprojects/{wrap}.wrap: no dependency() uses it")
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("every dependency() not from the system has a wrap:\n  " + "\n  ".join(checked))

#!/usr/bin/python3
"""Every build in .ci/*.sh honours NINJA_JOBS: each `ninja -C DIR` that builds
(not `-t` queries) passes -j from NINJA_JOBS (directly, or through a variable
set from it, as sanitizers.sh's JOBS=${SAN_JOBS:-${NINJA_JOBS:-2}}). Usage: check_ci_jobs.py SOURCE_ROOT"""
import os
import re
import sys

ci = os.path.join(sys.argv[1], ".ci")
failures = []
for name in sorted(os.listdir(ci)):
    if not name.endswith(".sh"):
        continue
    text = open(os.path.join(ci, name)).read()
    # Variables set from NINJA_JOBS, e.g. JOBS="${NINJA_JOBS:-2}".
    via = {m.group(1) for m in re.finditer(r'^\s*(?:export\s+)?(\w+)=.*\bNINJA_JOBS\b', text, re.M)}
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        if not re.search(r"\bninja\s+-C\b", code) or re.search(r"\s-t\s", code):
            continue
        m = re.search(r'-j\s*"?\$\{?(\w+)', code)
        if not m or (m.group(1) != "NINJA_JOBS" and m.group(1) not in via):
            failures.append(f".ci/{name}:{n}: ninja without -j from NINJA_JOBS: {line.strip()}")
print("\n".join(failures) or "every ninja build in .ci/ honours NINJA_JOBS")
sys.exit(1 if failures else 0)

#!/usr/bin/python3
"""Checks one Promela model with spin (suite 'model', test/model/meson.build).

  run_model.py --src DIR --work DIR --name NAME --model FILE.pml --expect verify|counterexample
               [--bfs] [--pan-arg ARG]... [--expect-error REGEX] [-DNAME[=VALUE]]...

Copies the models into WORK/NAME (every output stays in the build directory),
generates the verifier (spin -a), compiles it with gcc and runs it.

verify: the search must be exhaustive and find nothing: "errors: 0", no
  "max search depth too small", no "out of memory", no "Search not completed".
  State compression (-DCOLLAPSE) is lossless; bitstate hashing, which could
  skip states, is never used here.
counterexample: spin must find at least one error (a mutation or the broken
  design); the trail is replayed (spin -t) and its MODEL lines printed: who
  sent what, and which receive consumed it.
Exit status 77 (skipped) when spin or gcc is missing.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time


def run(cmd, cwd, log=None):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if log:
        with open(os.path.join(cwd, log), "w") as f:
            f.write(p.stdout)
    return p.returncode, p.stdout


def field(pattern, text, default=None):
    m = re.search(pattern, text, re.MULTILINE)
    return m.group(1) if m else default


def summary(out):
    """spin's summary lines, as pan prints them."""
    keep = ("State-vector", "states, stored", "states, matched", "transitions (= stored+matched)",
            "total actual memory usage", "pan: elapsed time", "Search not completed",
            "max search depth too small", "out of memory")
    return [line.rstrip() for line in out.splitlines() if any(k in line for k in keep)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--expect", choices=["verify", "counterexample"], required=True)
    ap.add_argument("--bfs", action="store_true", help="breadth-first: the shortest counterexample")
    ap.add_argument("--pan-arg", action="append", default=[])
    ap.add_argument("--expect-error", help="regex the error report must match")
    ap.add_argument("--depth", type=int, default=100000)
    args, defines = ap.parse_known_args()
    bad = [d for d in defines if not d.startswith("-D")]
    if bad:
        ap.error(f"unknown arguments {bad}")

    spin, gcc = shutil.which("spin"), shutil.which("gcc")
    if not spin or not gcc:
        print("SKIP: needs spin and gcc (Debian: apt-get install spin gcc)")
        return 77

    work = os.path.join(args.work, args.name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    for f in glob.glob(os.path.join(args.src, "*.pml")):
        shutil.copy(f, work)
    config = " ".join(d[2:] for d in defines) or "defaults"
    print(f"model {args.model} [{config}], expecting {'an exhaustive search with no error' if args.expect == 'verify' else 'a counterexample'}")

    rc, out = run([spin, "-a"] + defines + [args.model], work, "spin-a.log")
    if rc != 0:
        print(out)
        print("FAIL: spin -a failed")
        return 1
    cflags = ["-O1" if args.expect == "verify" else "-O0", "-w", "-DVECTORSZ=4096"]
    cflags += ["-DBFS"] if args.bfs else ["-DCOLLAPSE"]
    t0 = time.time()
    rc, out = run([gcc] + cflags + ["-o", "pan", "pan.c"], work, "gcc.log")
    if rc != 0:
        print(out[-4000:])
        print("FAIL: compiling pan.c failed")
        return 1
    compile_s = time.time() - t0
    pan_args = [f"-m{args.depth}", "-w24" if args.expect == "verify" else "-w20"] + args.pan_arg
    t0 = time.time()
    rc, out = run(["./pan"] + pan_args, work, "pan.out")
    pan_s = time.time() - t0

    errors = int(field(r"errors: (\d+)", out, "-1"))
    stored = field(r"^\s*(\S+) states, stored", out, "?")
    transitions = field(r"^\s*(\S+) transitions", out, "?")
    depth = field(r"depth reached (\d+)", out, "?")
    memory = field(r"^\s*(\S+)\s+total actual memory usage", out, "?")
    truncated = "max search depth too small" in out
    oom = "out of memory" in out or "pan: reached -DMEMLIM bound" in out
    incomplete = "Search not completed" in out
    print(f"spin -a {' '.join(defines)} {args.model}; gcc {' '.join(cflags)} ({compile_s:.1f} s); "
          f"./pan {' '.join(pan_args)} ({pan_s:.1f} s)")
    for line in summary(out):
        print("  | " + line)

    if args.expect == "verify":
        problems = []
        if errors != 0:
            problems.append(f"errors: {errors}")
        if truncated:
            problems.append("max search depth too small: the search was cut at the depth limit")
        if oom:
            problems.append("out of memory: the search was not completed")
        if incomplete:
            problems.append("search not completed")
        if "BITSTATE" in " ".join(cflags):
            problems.append("bitstate search is not exhaustive")
        if problems:
            print(out[-6000:])
            if errors > 0:
                replay(spin, defines, args.model, work)
            print("FAIL: " + "; ".join(problems))
            return 1
        print(f"OK {args.name}: errors 0; {stored} states stored, {transitions} transitions, depth reached "
              f"{depth} (limit {args.depth}); search complete (exhaustive, not cut by depth or memory); "
              f"{memory} MB; {pan_s:.1f} s")
        return 0

    if errors < 1:
        print(out[-3000:])
        print("FAIL: spin found no counterexample, so this property has no teeth")
        return 1
    report = field(r"^(pan:1: .*)$", out, "")
    print(f"spin found the error: {report}")
    if args.expect_error and not re.search(args.expect_error, report):
        print(f"FAIL: expected an error matching {args.expect_error!r}")
        return 1
    replay(spin, defines, args.model, work)
    at = field(r"at depth (\d+)", report, "?")
    print(f"OK {args.name}: counterexample found ({stored} states stored, trail depth {at})")
    return 0


def replay(spin, defines, model, work):
    """Replays the trail; prints what the model's printf lines say happened."""
    rc, out = run([spin, "-t"] + defines + [model], work, "trail.txt")
    print("counterexample (spin -t, the model's own account of each step):")
    steps = 0
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("MODEL: "):
            steps += 1
            print(f"  {steps:3d}. {line[len('MODEL: '):]}")
        elif line.startswith("spin: text of failed assertion") or "invalid end state" in line:
            print(f"       => {line}")
    if "assertion" not in out:
        print("       => no assertion failed: a state in which some process can never go on "
              "(spin: invalid end state, i.e. a hang)")
    print(f"  (full trail: {os.path.join(work, 'trail.txt')}; spin -t -p there for every statement)")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""How long dlopen() of a shared object takes in a fresh process (a benchmark,
not a test): NVSHMEM pays it once per process when it loads its bootstrap
plug-in (docs/benchmarks.md).

  dlopen_bench.py [--runs N] SHARED_OBJECT...

Each run is a new python3 process that times one dlopen(RTLD_NOW | RTLD_LOCAL)
and dlclose of nothing else; prints the median and the range in ms.
"""
import argparse
import statistics
import subprocess
import sys

CHILD = r"""
import ctypes, os, sys, time
t = time.perf_counter()
ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_LOCAL)
print((time.perf_counter() - t) * 1000.0)
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("objects", nargs="+")
    args = parser.parse_args()
    for path in args.objects:
        times = []
        for _ in range(args.runs):
            out = subprocess.run([sys.executable, "-c", CHILD, path], check=True, capture_output=True, text=True)
            times.append(float(out.stdout.strip()))
        print(f"{path}: dlopen median {statistics.median(times):.2f} ms "
              f"(min {min(times):.2f}, max {max(times):.2f}, {args.runs} fresh processes)")


if __name__ == "__main__":
    main()

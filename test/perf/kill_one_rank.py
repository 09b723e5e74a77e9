#!/usr/bin/env python3
"""Kill one rank of a running tether-bench all-gather loop; time how long the
survivors take to fail (docs/benchmarks.md, "Abort at scale").

  kill_one_rank.py BUILD/test/perf/tether-bench --nranks 256 [--after 20] [--trials 3]
                   [--timeout-ms 60000] [--victim R]

Starts `tether-bench --nranks N --op allgather --iters 2000000 --timeout-ms T`,
waits `--after` seconds, SIGKILLs one child (random rank unless --victim),
then reads the survivors' error lines ("tether-bench rank R: ...") as they
arrive. Prints, per trial: survivors that reported, how many named the victim
("lost rank V"), the slowest report after the kill, and how many hit their
deadline ("timed out"). A benchmark, not a test: nothing is asserted.
"""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time


def children_of(pid):
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return sorted(int(x) for x in out.split())


def trial(args, rng):
    cmd = [args.bench, "--nranks", str(args.nranks), "--op", "allgather", "--bytes", "4", "--iters", "2000000",
           "--warmup", "0", "--timeout-ms", str(args.timeout_ms)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, bufsize=1)
    reports = {}  # rank -> (time, line)
    done = threading.Event()

    def reader():
        for line in p.stderr:
            m = re.match(r"tether-bench rank (\d+): (.*)", line)
            if m:
                reports[int(m.group(1))] = (time.monotonic(), m.group(2).strip())
        done.set()

    threading.Thread(target=reader, daemon=True).start()
    time.sleep(args.after)
    kids = children_of(p.pid)  # forked in rank order
    if len(kids) != args.nranks:
        print(f"  only {len(kids)} of {args.nranks} ranks running after {args.after} s; skipped")
        p.kill()
        p.wait()
        return None
    victim = args.victim if args.victim is not None else rng.randrange(args.nranks)
    killed = time.monotonic()
    os.kill(kids[victim], signal.SIGKILL)
    p.wait()
    done.wait(10)
    survivors = args.nranks - 1
    named = sum(1 for r, (_, line) in reports.items() if r != victim and f"lost rank {victim}" in line)
    timed_out = sum(1 for r, (_, line) in reports.items() if r != victim and "timed out" in line)
    worst = max((t - killed for r, (t, _) in reports.items() if r != victim), default=float("nan"))
    others = [line for r, (_, line) in reports.items() if r != victim and f"lost rank {victim}" not in line]
    print(f"  victim {victim}: {len([r for r in reports if r != victim])}/{survivors} survivors reported, "
          f"{named} named it, {timed_out} timed out, slowest report {worst * 1000:.0f} ms after the kill, "
          f"bench ended {(time.monotonic() - killed) * 1000:.0f} ms after it")
    for line in others[:3]:
        print("    not naming it:", line)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench")
    ap.add_argument("--nranks", type=int, default=256)
    ap.add_argument("--after", type=float, default=20.0)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--timeout-ms", type=int, default=60000)
    ap.add_argument("--victim", type=int)
    ap.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    print(f"{args.nranks} ranks, kill after {args.after} s, timeout {args.timeout_ms} ms, seed {args.seed}, "
          f"load {os.getloadavg()[0]:.1f}")
    worst = [w for w in (trial(args, rng) for _ in range(args.trials)) if w is not None]
    if worst:
        print(f"worst kill-to-last-error over {len(worst)} trials: {max(worst) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Runs a benchmark with --json and checks each line: it parses, has every key,
and its numbers are consistent (median <= p99 <= max, all positive; tether's
init phases in bring-up order, absent ones null; its counters match its calls;
its socket peak's rank and the others' peak agree with max_fds).
--most KEY=N (repeatable, before BENCH): every line's KEY is present and at most N.
Usage: check_bench_json.py [--most KEY=N ...] BENCH [ARGS...]"""
import json
import subprocess
import sys

KEYS = {"impl", "op", "nranks", "bytes", "iters", "init_ms", "first_us", "median_us", "p99_us", "max_us"}


PHASES = ("listen", "host_local", "registered", "table_received", "first_link", "total")


def check_phases(phases, line, root):
    """Every phase is a number or null (absent); listen, the table and the
    total are there; present ones are in bring-up order. The root (rank 0)
    registers itself and makes the table: its own host-local meeting, when
    another rank leads its group, may end after the table."""
    if set(phases) != set(PHASES):
        sys.exit(f"init phases {sorted(phases)} are not {sorted(PHASES)} in {line}")
    if any(phases[p] is None for p in ("listen", "table_received", "total")):
        sys.exit(f"listen, table_received or total absent in {line}")
    at = {p: v for p, v in phases.items() if v is not None}
    if any(v < 0 for v in at.values()):
        sys.exit(f"a negative phase in {line}")
    for early, late in (("listen", "registered"), ("listen", "host_local"), ("registered", "table_received"),
                        ("host_local", "table_received"), ("listen", "table_received"),
                        ("table_received", "total"), ("table_received", "first_link")):
        if root and (early, late) == ("host_local", "table_received"):
            continue
        if early in at and late in at and at[early] > at[late] + 0.002:
            sys.exit(f"init phase {early} after {late} in {line}")


def check_observed(record, line):
    """tether-bench's init phases (rank 0's and the slowest rank's) and counters."""
    phases = record.get("init_phases_ms")
    counters = record.get("counters")
    if not phases or not counters:
        sys.exit(f"init_phases_ms or counters missing in {line}")
    check_phases(phases["rank0"], line, True)
    check_phases(phases["slowest"], line, phases["slowest_rank"] == 0)
    if not 0 <= phases["slowest_rank"] < record["nranks"] or phases["slowest"]["total"] < phases["rank0"]["total"]:
        sys.exit(f"the slowest rank is not the one with the longest init in {line}")
    calls_per_iteration = 2 if record["op"] in ("sendrecv", "pingpong") else 1
    if counters["calls_rank0"] != counters["calls_timed"] * calls_per_iteration:
        sys.exit(f"rank 0 counted {counters['calls_rank0']} calls, not {calls_per_iteration} per timed call in {line}")
    if record["nranks"] > 1 and not counters["frames_sent"] > 0:
        sys.exit(f"no frames counted on {record['nranks']} ranks in {line}")
    if any(counters[k] < 0 for k in ("bytes_sent", "dials", "redials", "budget_closes")):
        sys.exit(f"a negative count in {line}")
    # The rank with the peak sockets holds max_fds; every other rank at most that.
    if not 0 <= record.get("max_fds_rank", -1) < record["nranks"] or record.get("max_fds_others", 0) > record["max_fds"]:
        sys.exit(f"max_fds_rank missing or max_fds_others above max_fds in {line}")
    if record["nranks"] > 1 and not record.get("max_fds_others", 0) > 0:
        sys.exit(f"max_fds_others missing or not positive in {line}")
    if not record.get("gather_ms", -1) >= 0:
        sys.exit(f"gather_ms missing or negative in {line}")


def main():
    command = sys.argv[1:]
    most = {}
    while command and command[0] == "--most":
        key, _, value = command[1].partition("=")
        most[key] = float(value)
        command = command[2:]
    run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=50)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        sys.exit(f"{command[0]} exited with {run.returncode}")
    ops = [a for i, a in enumerate(command) if i > 0 and command[i - 1] == "--op"]
    expected = len(ops[0].split(",")) if ops else 1
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    if len(lines) != expected:
        sys.exit(f"expected {expected} JSON lines, got {len(lines)}:\n{run.stdout}")
    for line in lines:
        record = json.loads(line)
        missing = KEYS - record.keys()
        if missing:
            sys.exit(f"missing keys {sorted(missing)} in {line}")
        if not 0 < record["median_us"] <= record["p99_us"] <= record["max_us"]:
            sys.exit(f"inconsistent latencies in {line}")
        if record["impl"] == "tether" and not (record.get("max_fds", 0) > 0 and record.get("max_rss_kb", 0) > 0):
            sys.exit(f"max_fds or max_rss_kb missing or not positive in {line}")
        if record["init_ms"] <= 0:
            sys.exit(f"init_ms not positive in {line}")
        # The rendezvous after the last rank started lies between the fastest and
        # the slowest rank's init (each rounded to 0.001 ms on its own).
        if record["impl"] == "tether" and not (
                0 < record.get("rendezvous_ms", 0)
                and record["init_min_ms"] - 0.002 <= record["rendezvous_ms"] <= record["init_ms"] + 0.002):
            sys.exit(f"rendezvous_ms missing or not within [init_min_ms, init_ms] in {line}")
        if record["impl"] == "tether":
            check_observed(record, line)
        for key, bound in most.items():
            if key not in record or record[key] > bound:
                sys.exit(f"{key} missing or above {bound:g} in {line}")
        print(line)


if __name__ == "__main__":
    main()

#!/bin/bash
# What one call touches, counted: cachegrind on every rank of tether-bench (or
# tcp-floor) with caches small enough that a line missed is one the call
# touched anew (I1, D1 8 KiB; LL 16 KiB), `--iters 250` minus `--iters 50`,
# summed over the ranks, per call. A deterministic stand-in for the cache
# misses this VM's missing hardware counters cannot give (docs/benchmarks.md,
# "The read side without a coroutine").
#
#   test/perf/cachegrind_call.sh BENCH [ARGS...]
#   test/perf/cachegrind_call.sh build/test/perf/tether-bench --nranks 4 --op allgather --bytes 64
#   LD_LIBRARY_PATH=/old/lib test/perf/cachegrind_call.sh build/test/perf/tether-bench --nranks 4 ...
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,11p "$0"; exit 2; }
command -v valgrind > /dev/null || { echo "cachegrind_call.sh: needs valgrind" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for iters in 50 250; do
  mkdir "$work/$iters"
  valgrind --tool=cachegrind --cache-sim=yes --I1=8192,2,64 --D1=8192,2,64 --LL=16384,4,64 \
    --cachegrind-out-file="$work/$iters/cg.%p" "$@" --iters "$iters" --warmup 5 > "$work/$iters/out.txt" 2>&1
  # Every process but the first (the benchmark's parent, which only forks and waits).
  ls "$work/$iters"/cg.* | sort -t. -k2 -n | tail -n +2 | xargs grep -h '^summary' | cut -d' ' -f2- \
    > "$work/$iters/sum.txt"
done
python3 - "$work/50/sum.txt" "$work/250/sum.txt" <<'PY'
import sys
def total(path):
    rows = [list(map(int, line.split())) for line in open(path)]
    return [sum(r[i] for r in rows) for i in range(9)]  # Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
a, b = total(sys.argv[1]), total(sys.argv[2])
d = [(y - x) / 200 for x, y in zip(a, b)]
print("per call, all ranks: instructions %.0f, code lines %.0f, data lines %.0f" % (d[0], d[2], d[5] + d[8]))
PY

#!/usr/bin/env bash
# Runs tether-bench, tcp-floor (bare blocking sockets: the least a
# non-spinning TCP all-gather costs here) and mpi-bench (Open MPI over TCP
# loopback and over shared memory) in one sitting, side by side.
#
#   test/perf/compare.sh [BUILD_DIR]        (default: build)
#   env: NRANKS="8 16"  OP=allgather  BYTES=64  ITERS=1000  WARMUP=50
#
# Latencies: per iteration the slowest rank's time, then median/p99/max over
# iterations (bench_common.hpp). init_ms: slowest rank's TcpBootstrap
# constructor / MPI_Init. first_us: slowest rank's first call (opens connections).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
bin="$build/test/perf"
NRANKS=${NRANKS:-"8 16"}
OP=${OP:-allgather}
BYTES=${BYTES:-64}
ITERS=${ITERS:-1000}
WARMUP=${WARMUP:-50}
args=(--op "$OP" --bytes "$BYTES" --iters "$ITERS" --warmup "$WARMUP" --json)

[[ -x "$bin/tether-bench" ]] || { echo "compare.sh: $bin/tether-bench not built" >&2; exit 1; }
have_mpi=1
if [[ ! -x "$bin/mpi-bench" ]] || ! command -v mpirun >/dev/null; then
  echo "compare.sh: mpi-bench or mpirun missing; tether only" >&2
  have_mpi=0
fi

results=$(mktemp)
trap 'rm -f "$results"' EXIT

# label, command...: runs one benchmark, tags its JSON lines with the label.
run() {
  local label=$1; shift
  echo "# $label: $*" >&2
  if ! timeout 300 "$@" | sed "s/^{/{\"label\":\"$label\",/" >>"$results"; then
    echo "compare.sh: $label failed" >&2
  fi
}

mpirun_common=(mpirun --allow-run-as-root --oversubscribe)
for n in $NRANKS; do
  run "tether-tcp-lo" "$bin/tether-bench" --nranks "$n" "${args[@]}"
  # The floor: bare blocking sockets, no library (all-gather and ping-pong only).
  if [[ ",$OP," =~ ^(,(allgather|pingpong))+,$ && -x "$bin/tcp-floor" ]]; then
    run "floor-tcp-lo" "$bin/tcp-floor" --nranks "$n" "${args[@]}"
  fi
  if (( have_mpi )); then
    run "openmpi-tcp-lo" "${mpirun_common[@]}" -np "$n" --mca btl self,tcp --mca btl_tcp_if_include lo \
      "$bin/mpi-bench" "${args[@]}"
    run "openmpi-vader-shm" "${mpirun_common[@]}" -np "$n" --mca btl self,vader "$bin/mpi-bench" "${args[@]}"
  fi
done

echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores; op=$OP bytes=$BYTES iters=$ITERS warmup=$WARMUP"
/usr/bin/python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
head = ("transport", "op", "N", "bytes", "init_ms", "first_us", "median_us", "p99_us", "max_us")
print("| " + " | ".join(head) + " |")
print("|" + "|".join("---" for _ in head) + "|")
for r in sorted(rows, key=lambda r: (r["nranks"], r["op"], r["label"])):
    print("| " + " | ".join(str(v) for v in (r["label"], r["op"], r["nranks"], r["bytes"], r["init_ms"],
                                           r["first_us"], r["median_us"], r["p99_us"], r["max_us"])) + " |")
PY

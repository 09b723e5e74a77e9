#!/bin/bash
# Builds tether's libFuzzer targets with clang (ASan+UBSan, coverage-instrumented
# library) and runs each for a short time on its seed corpus. Prints the
# executions per target; exits non-zero on a build failure or a crash.
#   FUZZ_SECONDS (default 20) — run time per target
#   BUILD_DIR    (default build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-20}
BUILD_DIR=${BUILD_DIR:-build-fuzz}

need=()
for p in clang libclang-rt-14-dev libibverbs-dev; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then apt-get install -y -q "${need[@]}" >/dev/null; fi

if [ ! -d "$BUILD_DIR" ]; then
  CC=clang CXX=clang++ meson setup "$BUILD_DIR" -Dfuzz=true -Dexamples=false \
    -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized \
    "-Dcpp_args=['-fsanitize=fuzzer-no-link','-fno-sanitize=function']"
fi
# (-fno-sanitize=function: clang 14's UBSan function check cannot compile the
# library's coroutines: "Cannot represent a difference across sections".)
targets=(frame_header handshake unique_id)
# The RDMA record target exists when the RDMA module is built (libibverbs-dev).
if ninja -C "$BUILD_DIR" -t targets all | grep -q '^test/fuzz/fuzz_rdma_records:'; then
  targets+=(rdma_records)
else
  echo "note: no fuzz_rdma_records (RDMA module not built: libibverbs-dev missing?)"
fi
ninja -C "$BUILD_DIR" -j"${NINJA_JOBS:-2}" "${targets[@]/#/test/fuzz/fuzz_}"

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
summary=""
for t in "${targets[@]}"; do
  work=$(mktemp -d)
  cp test/fuzz/corpus/"$t"/* "$work"/
  log="$BUILD_DIR/fuzz_$t.log"
  if "$BUILD_DIR/test/fuzz/fuzz_$t" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 \
      -artifact_prefix="$BUILD_DIR/fuzz_$t-" "$work" >"$log" 2>&1; then
    result=ok
  else
    result=FAILED
    status=1
    tail -40 "$log"
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  summary+=$(printf '%-14s %-6s %12s executions in %ss (corpus %s -> %s files)' "$t" "$result" "$execs" \
    "$FUZZ_SECONDS" "$(ls test/fuzz/corpus/"$t" | wc -l)" "$(ls "$work" | wc -l)")$'\n'
  rm -rf "$work"
done
echo "fuzz summary:"
printf '%s' "$summary"
exit $status

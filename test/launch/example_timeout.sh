#!/bin/bash
# example_timeout.sh ALLGATHER_SETUP — the example's --timeout-ms applies only
# when given: without it TETHER_TIMEOUT_MS sets the deadline. A lone rank 1
# whose root (127.0.0.1:1) never answers must give up after TETHER_TIMEOUT_MS,
# and after --timeout-ms when that is given. `timeout` turns a wrong (long)
# deadline into a failure instead of a stuck test.
set -u
exe=${1:?usage: example_timeout.sh ALLGATHER_SETUP}
fail() { echo "FAIL: $*"; exit 1; }

run() {  # run EXPECTED_MS [ARGS...]
  local expected=$1
  shift
  local out rc
  out=$(TETHER_RANK=1 TETHER_NRANKS=2 TETHER_ROOT=127.0.0.1:1 TETHER_DEBUG=NONE \
        timeout 20 "$exe" --verbs=none "$@" 2>&1)
  rc=$?
  echo "$out"
  [ $rc -ne 124 ] || fail "still waiting after 20 s (expected a ${expected} ms deadline)"
  [ $rc -ne 0 ] || fail "a rank without a root succeeded"
  grep -q "timed out after ${expected} ms" <<<"$out" || fail "expected a ${expected} ms deadline"
}

export TETHER_TIMEOUT_MS=1500
run 1500
run 800 --timeout-ms 800
echo "PASS: --timeout-ms only when given, else TETHER_TIMEOUT_MS"

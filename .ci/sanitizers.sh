#!/bin/bash
# Builds tether and its tests under ASan+UBSan (build-asan) and under TSan
# (build-tsan) and runs the test suites in each. Exits non-zero if a build
# fails, a test fails, or a sanitizer reports anything.
#   SAN_JOBS        parallel compile jobs (default NINJA_JOBS, else 2)
#   SAN_ONLY        "asan" or "tsan" to run one of them
#   ASAN_SKIP_SUITES / TSAN_SKIP_SUITES  suites left out (space separated)
# Left out by default, both builds: perf (benchmarks: their timings mean nothing
# under a sanitizer and they are the slowest suite) and model (spin's verifiers
# run no tether code: a sanitized build changes nothing) and scale (256 forked
# ranks: a sanitizer's shadow memory per process would not fit; the same code
# runs at 3-16 ranks in the other suites). TSan also leaves out pmix (libpmix
# and its libevent are not built with TSan: it reports their recursive mutexes
# as double locks; ASan runs those tests) and
# stress (long many-rank runs; 5-15x slower under TSan would blow the CI
# budget; the same code paths run in the other suites under TSan).
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${SAN_JOBS:-${NINJA_JOBS:-2}}
ASAN_SKIP_SUITES=${ASAN_SKIP_SUITES:-perf model scale}
TSAN_SKIP_SUITES=${TSAN_SKIP_SUITES:-perf stress model scale pmix}

# Any report is a failure, with a stack to read.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# .ci/lsan.supp: leaks inside libpmix itself (the PMIx rendezvous tests).
export LSAN_OPTIONS="suppressions=$PWD/.ci/lsan.supp:print_suppressions=0"
# .ci/tsan.supp: one documented false positive (exception_ptr's reference
# count lives in libstdc++, which is not built with TSan).
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0:suppressions=$PWD/.ci/tsan.supp"

configure() {  # dir, sanitize
  if [ ! -d "$1" ]; then
    # -O1 -g1: sanitized builds compile in a fraction of -O2 -g's time (CI budget).
    meson setup "$1" -Db_sanitize="$2" -Db_lundef=false -Dbuildtype=plain -Dexamples=false \
      "-Dcpp_args=['-O1','-g1','-fno-omit-frame-pointer']"
  fi
}

run_suites() {  # dir, skipped suites, [runner prefix]
  local dir=$1 skip=$2
  shift 2
  local args=()
  for s in $skip; do args+=(--no-suite "$s"); done
  # Sanitized code is slower: give each test three times its timeout.
  local rc=0
  "$@" meson test -C "$dir" --print-errorlogs --num-processes 2 --timeout-multiplier 3 "${args[@]}" || rc=1
  # A report in a forked rank or a recoverable UBSan check may not fail its
  # test by itself: any report in the log fails the run.
  local log="$dir/meson-logs/testlog.txt"
  if grep -qE 'runtime error:|ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer' "$log"; then
    echo "sanitizer reports in $log:"
    grep -E 'runtime error:|ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer' "$log" | sort | uniq -c | head -20
    rc=1
  fi
  return $rc
}

# The collectives tests' largest payload: 256 KiB instead of 4 MiB (still
# past the 64 KiB at which frames go by reference); the 4 MiB runs are in the
# unsanitized suite. Under TSan the 4 MiB cases alone took ~10 minutes.
export TETHER_TEST_LARGE_BYTES=${TETHER_TEST_LARGE_BYTES:-262144}

status=0
if [ "${SAN_ONLY:-asan}" = asan ]; then
  echo "=== ASan+UBSan (skipping suites: $ASAN_SKIP_SUITES)"
  configure build-asan address,undefined
  ninja -C build-asan -j"$JOBS"
  run_suites build-asan "$ASAN_SKIP_SUITES" || status=1
fi
if [ "${SAN_ONLY:-tsan}" = tsan ]; then
  echo "=== TSan (skipping suites: $TSAN_SKIP_SUITES)"
  configure build-tsan thread
  ninja -C build-tsan -j"$JOBS"
  # TSan's shadow memory needs a fixed layout; kernels with many mmap random
  # bits break it, so run without address randomization.
  run_suites build-tsan "$TSAN_SKIP_SUITES" setarch "$(uname -m)" -R || status=1
fi
exit $status

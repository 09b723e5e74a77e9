#!/bin/bash
# Builds tether and runs the whole test suite (all meson suites).
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build -j"${NINJA_JOBS:-2}"
exec meson test -C build --print-errorlogs --num-processes "${TEST_JOBS:-2}" "$@"

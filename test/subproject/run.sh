#!/bin/bash
# run.sh [BUILD_ARGS...] — tether as a Meson subproject of a tiny parent
# (test/subproject/parent), configured the way a runtime's release CI does:
# -Dwerror=true -Dbuildtype=release (GCC at -O3). Checks that the subproject
# configures none of its tests, examples or benchmarks (they need Catch2, MPI,
# cxxopts), that the library builds without warnings, and that the parent runs.
# Everything lives in a temporary directory, removed on every exit path.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/tether-subproject-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cp -r "$src/test/subproject/parent" "$work/parent"
mkdir "$work/parent/subprojects"
ln -s "$src" "$work/parent/subprojects/tether"
cd "$work/parent" || exit 1

meson setup build -Dwerror=true -Dbuildtype=release "$@" >setup.log 2>&1 || { cat setup.log; fail "meson setup"; }
grep -iE 'dependency (catch2|mpi|cxxopts|nlohmann)|program mpirun' setup.log && fail "the subproject looked for test or example dependencies"
targets=$(meson introspect build --targets | /usr/bin/python3 -c \
  'import json, sys; print(" ".join(t["name"] for t in json.load(sys.stdin)))')
echo "targets: $targets"
for unwanted in allgather-setup tether-bench tether-stress core_unit_test launch_test; do
  grep -qw -- "$unwanted" <<<"$targets" && fail "the subproject configured $unwanted"
done
ninja -C build -j"${NINJA_JOBS:-2}" parent >build.log 2>&1 || { cat build.log; fail "werror release build"; }
grep -q 'warning:' build.log && { cat build.log; fail "warnings in the release build"; }
build/parent || fail "the parent program"
echo "PASS: tether builds as a subproject with -Dwerror=true -Dbuildtype=release"

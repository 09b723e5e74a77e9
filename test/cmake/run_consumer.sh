#!/bin/bash
# Installs this build into a temporary directory (meson install --destdir),
# builds test/cmake/consumer against it with CMake (find_package(tether)), and
# runs its C++ and C programs on 4 ranks each (TETHER_RANK/TETHER_NRANKS and a
# TETHER_UID_FILE that rank 0 writes). Exit 77 (skipped) without cmake.
# SANITIZE is the build's b_sanitize: the consumer is built with the same.
#   run_consumer.sh MESON BUILD_DIR SOURCE_DIR PREFIX SANITIZE
set -euo pipefail
meson=$1 build=$2 src=$3 prefix=$4 sanitize=$5
flags=()
if [ "$sanitize" != none ]; then
  for v in C CXX EXE_LINKER; do flags+=("-DCMAKE_${v}_FLAGS=-fsanitize=$sanitize"); done
fi
if ! command -v cmake >/dev/null; then
  echo "SKIP: cmake is not installed (.ci/deps.sh installs it)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$meson" install -C "$build" --no-rebuild --quiet --destdir "$tmp/root" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; exit 1; }
config=$(find "$tmp/root" -name tetherConfig.cmake)
[ -n "$config" ] || { echo "tetherConfig.cmake was not installed"; exit 1; }
[ -f "$(dirname "$config")/tetherConfigVersion.cmake" ] || { echo "tetherConfigVersion.cmake missing"; exit 1; }
echo "installed: ${config#"$tmp/root"}"

cmake -S "$src/test/cmake/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/root$prefix" "${flags[@]}" >"$tmp/configure.log" 2>&1 ||
  { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/consumer" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }

# The programs must run on the installed library, not the build tree's
# (meson test puts that on LD_LIBRARY_PATH).
unset LD_LIBRARY_PATH
status=0
for program in consumer_cpp consumer_c; do
  lib=$(ldd "$tmp/consumer/$program" | awk '/libtether/ {print $3}')
  case $lib in
    "$tmp/root"/*) echo "$program uses ${lib#"$tmp/root"}" ;;
    *) echo "$program does not use the installed libtether: ${lib:-not found}"; exit 1 ;;
  esac
  pids=()
  for rank in 0 1 2 3; do
    TETHER_RANK=$rank TETHER_NRANKS=4 TETHER_UID_FILE="$tmp/$program.uid" TETHER_TIMEOUT_MS=20000 \
      timeout 30 "$tmp/consumer/$program" >"$tmp/$program.$rank.out" 2>&1 &
    pids+=($!)
  done
  for rank in 0 1 2 3; do
    if ! wait "${pids[$rank]}"; then
      echo "$program rank $rank failed:"
      status=1
    fi
    cat "$tmp/$program.$rank.out"
  done
done
# The fake verbs backend, when this build has it (tether::fakeverbs).
if [ -x "$tmp/consumer/consumer_fakeverbs" ]; then
  "$tmp/consumer/consumer_fakeverbs" || status=1
elif find "$tmp/root" -name 'libtether-fakeverbs.so*' | grep -q .; then
  echo "libtether-fakeverbs is installed but CMake made no tether::fakeverbs consumer"
  status=1
fi
exit $status

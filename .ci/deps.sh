#!/bin/bash
# Installs (apt-get, Debian 12) whatever tether's build, tests and example need
# and is missing. Safe to run again: installed packages are left alone.
set -euo pipefail
packages=(
  g++ meson ninja-build pkg-config    # toolchain
  libboost1.81-dev                    # Boost.Asio (header-only), Boost.Endian
  libssl-dev                          # libcrypto: HMAC-SHA256 handshake, CSPRNG
  libfmt-dev                          # formatting of messages and logs
  libibverbs-dev                      # RDMA QP bring-up module
  libpmix-dev                         # PMIx rendezvous (TETHER_RENDEZVOUS=pmix)
  catch2                              # tests (prebuilt Catch2WithMain)
  libcxxopts-dev nlohmann-json3-dev   # command-line options, benchmark JSON
  openmpi-bin libopenmpi-dev          # the mpirun launcher test and the MPI benchmark
  iproute2                            # network namespaces for the multi-host tests
  python3                             # benchmark smoke test's JSON check, docs snippet check
  cmake                               # the installed CMake package's consumer test
  spin                                # model checker: Promela models in test/model (suite model)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

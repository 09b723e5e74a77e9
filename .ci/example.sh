#!/bin/bash
# Builds tether and runs the example all-gather setup on 8 local ranks.
#   bash .ci/example.sh [extra allgather-setup options, e.g. --verbs=fake]
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build -j"${NINJA_JOBS:-2}" examples/allgather-setup
exec build/examples/allgather-setup --nranks 8 "$@"

#!/bin/bash
# Runs launch_env_child under Debian's mpirun: rank/size from OMPI_COMM_WORLD_*,
# the root from a TETHER_UID_FILE that rank 0 writes (tagged with Open MPI's job
# id) and removes once every rank has joined. Skips (77) without mpirun.
set -u
child=$1
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not found (apt-get install openmpi-bin)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$(timeout 90 mpirun --allow-run-as-root --oversubscribe -np 4 \
  --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
  -x TETHER_UID_FILE="$dir/uid" -x TETHER_TIMEOUT_MS=30000 -x TETHER_SOCKET_IFNAME=lo "$child" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: mpirun exited $rc"; exit 1; }
n=$(grep -c ' of 4 OK' <<<"$out")
[ "$n" -eq 4 ] || { echo "FAIL: $n of 4 ranks reported OK"; exit 1; }
[ ! -e "$dir/uid" ] || { echo "FAIL: rank 0 left TETHER_UID_FILE behind"; exit 1; }
echo "PASS: 4 ranks bootstrapped from Open MPI's environment; the uid file is gone"

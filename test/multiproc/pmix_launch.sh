#!/bin/bash
# PMIx rendezvous (TETHER_RENDEZVOUS=pmix).
#   pmix_launch.sh launch CHILD HAVE_PMIX: 8 ranks of CHILD under Debian's
#     mpirun, addresses from PMIx; skips (77) without mpirun or PMIx.
#   pmix_launch.sh no-launcher CHILD HAVE_PMIX: CHILD outside any PMIx launch
#     must fail at once with a clear InvalidArgument (not wait for a fence).
#   pmix_launch.sh pmix-only CHILD HAVE_PMIX: the same without
#     OMPI_COMM_WORLD_RANK/SIZE: rank and size from PMIx.
#   pmix_launch.sh fence-timeout CHILD HAVE_PMIX: 2 ranks under mpirun, rank 1
#     never joins: rank 0 must fail with the rendezvous timeout and exit (its
#     PMIx helper thread must not keep it alive); skips like launch.
set -u
mode=$1 child=$2 have=$3
if [ "$mode" = no-launcher ]; then
  if [ "$have" = true ]; then want='PMIX_RANK and PMIX_NAMESPACE are not set'; else want='has no PMIx'; fi
  exec timeout 60 env -u PMIX_RANK -u PMIX_NAMESPACE -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE \
    TETHER_RENDEZVOUS=pmix TETHER_RANK=0 TETHER_NRANKS=2 "$child" --expect-error "$want"
fi
if [ "$have" != true ]; then
  echo "SKIP: this build has no PMIx (apt-get install libpmix-dev, reconfigure with -Dpmix=enabled)"
  exit 77
fi
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not found (apt-get install openmpi-bin)"
  exit 77
fi
if [ "$mode" = fence-timeout ]; then
  out=$(timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 --mca oob_tcp_if_include lo \
    -x TETHER_RENDEZVOUS=pmix -x TETHER_TIMEOUT_MS=3000 -x TETHER_SOCKET_IFNAME=lo \
    sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then "$0" --expect-error "rendezvous (pmix) timed out" timeout \
             && echo "rank 0 PASS"; else sleep 8; fi' "$child" 2>&1)
  rc=$?
  echo "$out"
  [ $rc -ne 124 ] || { echo "FAIL: mpirun still running after 60 s"; exit 1; }
  grep -q '^rank 0 PASS' <<<"$out" || { echo "FAIL: rank 0 did not report the PMIx fence timeout"; exit 1; }
  echo "PASS: a missing rank gives the rendezvous timeout, and rank 0 exits"
  exit 0
fi
# pmix-only: OMPI_COMM_WORLD_RANK/SIZE unset, as under a launcher that sets
# only PMIX_RANK: the rank and size must come from PMIx itself.
if [ "$mode" = pmix-only ]; then
  run=(-x TETHER_DEBUG=info sh -c 'unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE; exec "$0"' "$child")
else
  run=("$child")
fi
out=$(timeout 90 mpirun --allow-run-as-root --oversubscribe -np 8 \
  --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
  -x TETHER_RENDEZVOUS=pmix -x TETHER_TIMEOUT_MS=30000 -x TETHER_SOCKET_IFNAME=lo "${run[@]}" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: mpirun exited $rc"; exit 1; }
n=$(grep -c ' of 8 OK' <<<"$out")
[ "$n" -eq 8 ] || { echo "FAIL: $n of 8 ranks reported OK"; exit 1; }
if [ "$mode" = pmix-only ]; then
  n=$(grep -c 'PMIX_JOB_SIZE=8 (PMIx)' <<<"$out")
  [ "$n" -eq 8 ] || { echo "FAIL: $n of 8 ranks took their rank and size from PMIx"; exit 1; }
fi
echo "PASS: 8 ranks found each other through PMIx; allgather, alltoall and barrier agree"

#!/bin/bash
# Init time of 8 ranks under mpirun, TETHER_RENDEZVOUS=pmix against root
# (TETHER_ROOT=127.0.0.1:PORT), interleaved (docs/benchmarks.md, "PMIx
# rendezvous"). Needs a build with PMIx. Usage: pmix_init_bench.sh PMIX_CHILD [ROUNDS]
child=$1; rounds=${2:-3}
common=(--allow-run-as-root --oversubscribe -np 8 --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x TETHER_TIMEOUT_MS=60000 -x TETHER_SOCKET_IFNAME=lo)
for i in $(seq $rounds); do
  for rv in pmix root; do
    if [ $rv = pmix ]; then extra=(-x TETHER_RENDEZVOUS=pmix); else extra=(-x TETHER_RENDEZVOUS=root -x TETHER_ROOT=127.0.0.1:$((29600+i))); fi
    t0=$(date +%s.%N)
    out=$(timeout 120 mpirun "${common[@]}" "${extra[@]}" "$child" 2>&1); rc=$?
    t1=$(date +%s.%N)
    ok=$(grep -c ' of 8 OK' <<<"$out")
    max=$(grep -o 'init [0-9.]*' <<<"$out" | awk '{if($2>m)m=$2} END{print m}')
    med=$(grep -o 'init [0-9.]*' <<<"$out" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
    printf "round %d %-4s rc=%d ok=%d init max %s ms median %s ms, mpirun wall %.2f s\n" $i $rv $rc $ok "$max" "$med" $(echo "$t1-$t0"|bc)
    [ $rc -eq 0 ] || echo "$out" | tail -5
  done
done

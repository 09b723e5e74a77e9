#!/bin/bash
# netns-stress.sh TETHER_STRESS [ARGS...] — runs tether-stress with its ranks
# spread over three network namespaces, each with its own address on a veth
# pair into a bridge (a fourth, "hub" namespace), so ranks talk over real
# interfaces instead of loopback. TETHER_SOCKET_IFNAME picks the veth.
#
# Everything is created by this script with names unique to it and removed on
# every exit path (success, failure, SIGTERM from meson's timeout). Exit 77
# (meson: skipped) with the reason when not root or namespaces do not work.
set -u

STRESS=${1:?usage: netns-stress.sh TETHER_STRESS [ARGS...]}
shift

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null 2>&1 || skip "the ip command (iproute2) is not installed"

PREFIX="tether-stress-$$"
HUB="$PREFIX-hub"
NAMESPACES=("$PREFIX-0" "$PREFIX-1" "$PREFIX-2")
SUBNET=10.77.0   # private; exists only inside these namespaces
STRESS_PID=

cleanup() {
  if [ -n "$STRESS_PID" ]; then
    kill -KILL -- "-$STRESS_PID" 2>/dev/null   # tether-stress and its ranks: one process group
    wait "$STRESS_PID" 2>/dev/null
  fi
  for ns in "${NAMESPACES[@]}" "$HUB"; do
    ip netns del "$ns" 2>/dev/null
  done
  # Deleting a namespace removes its veth ends and the bridge with it.
  local left
  left=$(ip netns list 2>/dev/null | grep -c "^$PREFIX-")
  [ "$left" = 0 ] || echo "warning: $left namespaces of $PREFIX could not be removed" >&2
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

ip netns add "$HUB" 2>/dev/null || skip "ip netns add failed (no namespace support here)"
ip -n "$HUB" link add br0 type bridge 2>/dev/null || skip "cannot create a bridge"
ip -n "$HUB" link set br0 up
i=0
for ns in "${NAMESPACES[@]}"; do
  ip netns add "$ns" || exit 1
  ip -n "$HUB" link add "h$i" type veth peer name tst0 netns "$ns" || skip "cannot create veth pairs"
  ip -n "$HUB" link set "h$i" master br0
  ip -n "$HUB" link set "h$i" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev tst0
  ip -n "$ns" link set tst0 up
  i=$((i + 1))
done
echo "namespaces: ${NAMESPACES[*]} on $SUBNET.0/24 (bridge in $HUB)"

# Ranks join the namespaces themselves (setns, as ip netns exec does); rank r
# goes to namespace r mod 3, rank 0 (the root) to the first.
export TETHER_SOCKET_IFNAME=tst0
setsid "$STRESS" --netns "$(IFS=,; echo "${NAMESPACES[*]}")" --root-host "$SUBNET.1" "$@" &
STRESS_PID=$!
wait "$STRESS_PID"
rc=$?
STRESS_PID=
exit $rc

/* broken.pml — the design tether replaces, for spin to refute.
 *
 * The bootstraps of the field reports (and test/control/naive_transport):
 * every message is its own short-lived TCP connection; the receiver
 * accept()s connections in whatever order the kernel hands them over and
 * matches each one by (peer, tag) alone, parking the ones nobody asked for
 * yet; collectives restart their tags at 0 on every call.
 *
 * Two ranks each run all-to-all then barrier (with two ranks both are one
 * message each way, both with tag 0). A payload names the operation it was
 * sent for; the assertion at every receive demands its own operation's
 * payload. spin finds the interleaving in which rank 1's barrier token is
 * accepted before its all-to-all block and consumed by the all-to-all.
 */
#define NCONN 4
mtype = { ALLTOALL, BARRIER };

/* connection c: connected by src to dst's listener, carrying (tag, payload) */
byte csrc[NCONN], cdst[NCONN], ctag[NCONN], cpl[NCONN];
bool pending[NCONN];          /* in dst's accept queue */
byte nconn;
/* parked: accepted messages nobody asked for yet, per rank (a small list) */
byte pk_src[4], pk_tag[4], pk_pl[4];
bool pk_used[4];

/* one connection per message: connect, write, close */
inline send(r, peer, tag, op) {
  atomic {
    c = nconn; nconn++;
    csrc[c] = r; cdst[c] = peer; ctag[c] = tag; cpl[c] = op; pending[c] = 1;
    printf("MODEL: rank %d sends %e (tag %d) to rank %d on connection %d\n", r, op, tag, peer, c)
  }
}

/* first parked message with (peer, tag), else accept connections, in ANY
 * order, until one has it; the others are parked */
inline recv(r, peer, tag, op) {
  atomic {
    got = 0;
    for (i : 2 * r .. 2 * r + 1) {
      if
      :: !got && pk_used[i] && pk_src[i] == peer && pk_tag[i] == tag ->
         pl = pk_pl[i]; pk_used[i] = 0; got = 1;
         printf("MODEL: rank %d %e recv (tag %d) takes the parked %e payload\n", r, op, tag, pl)
      :: else
      fi
    }
  }
  do
  :: got -> break
  :: else ->
     atomic {
       if                  /* accept(): the kernel picks any completed connection */
       :: pending[0] && cdst[0] == r -> c = 0
       :: pending[1] && cdst[1] == r -> c = 1
       :: pending[2] && cdst[2] == r -> c = 2
       :: pending[3] && cdst[3] == r -> c = 3
       fi;
       pending[c] = 0;
       if
       :: csrc[c] == peer && ctag[c] == tag ->
          pl = cpl[c]; got = 1;
          printf("MODEL: rank %d %e recv (tag %d) accepts connection %d: the %e payload\n", r, op, tag, c, pl)
       :: else ->          /* park it */
          if
          :: !pk_used[2 * r] -> i = 2 * r
          :: else -> i = 2 * r + 1
          fi;
          assert(!pk_used[i]);
          pk_used[i] = 1; pk_src[i] = csrc[c]; pk_tag[i] = ctag[c]; pk_pl[i] = cpl[c];
          printf("MODEL: rank %d accepts connection %d early and parks it\n", r, c)
       fi
     }
  od;
  if
  :: pl != op -> printf("MODEL: SWAPPED: rank %d's %e receive consumed the %e payload\n", r, op, pl)
  :: else
  fi;
  assert(pl == op)         /* the receive got its own operation's payload */
}

proctype Rank(byte r) {
  byte c, i, pl;
  bool got;
  /* all-to-all: tag 0 */
  send(r, 1 - r, 0, ALLTOALL);
  recv(r, 1 - r, 0, ALLTOALL);
  /* barrier: tags restart at 0 */
  send(r, 1 - r, 0, BARRIER);
  recv(r, 1 - r, 0, BARRIER)
}

init {
  atomic { run Rank(0); run Rank(1) }
}

/* matching.pml — tether's receive matching, checked with spin.
 *
 * Two ranks, one ordered stream each way (the link; links.pml checks that
 * it is one stream that loses and reorders nothing). Each rank runs a
 * sequence of collectives (all-to-all #1, barrier #2, all-to-all #3: the
 * same step 0 every time, the same opcode at #1 and #3); on two more
 * threads rank 0 sends rank 1 two point-to-point messages with one tag
 * (numerically equal to the barrier's opcode) and rank 1 receives them. Frames carry
 * the full key (kind, collective id, step, tag); receives are posted and
 * early frames stashed under it (match/mailbox), with the checks of the
 * sequence guard (tether/detail/core/sequence_guard.hpp, SequenceGuard::admit
 * and begin). Every payload names the operation it was sent for.
 *
 * Each handler runs as one atomic step, as on tether's progress thread; a
 * data frame arrives in two steps (header, then payload: LinkReader::pump),
 * and the app threads' calls interleave between them.
 *
 * Property (assertion at every delivery): a receive gets exactly the frame
 * sent for its key. At the end: the correct program completes with no
 * error; a mismatched program (-DMISMATCH: rank 1 calls all-to-all where
 * rank 0 calls barrier) ends with a Protocol error reported, never a
 * delivered wrong payload and never a hang (spin's invalid end states).
 *
 * Mutations that spin must refute: NO_RECHECK (a frame whose payload was
 * still arriving when its receive was posted is stashed anyway: the race the
 * stress harness found), PEER_TAG_KEY (match on (source, tag) only),
 * NO_COLL_CHECK (no check of a frame against the running collective; with
 * MISMATCH).
 */
mtype = { P2P, COLL, ABORT };
#define A2A 1                 /* opcodes: the tag of a collective frame */
#define BAR 2
#define OTHER(code) ((code) == A2A -> BAR : A2A)
#define PTAG 2                /* the p2p tag: numerically equal to BAR's opcode */
#define NCOLL 3
#define NP2P 2
#define CODE(r, i) ((i) == 2 && !((r) == 1 && MIS) -> BAR : A2A)  /* collective #i's opcode */
#ifdef MISMATCH
#define MIS 1
#else
#define MIS 0
#endif
/* payloads name their operation: sender, collective id or p2p sequence */
#define PL_COLL(s, i) (16 * (s) + (i))
#define PL_P2P(s, n) (64 + 16 * (s) + (n))

chan link[2] = [8] of { mtype, byte, byte, byte, byte };   /* to rank r: kind, coll, step, tag, payload */
chan posted[2] = [2] of { mtype, byte, byte, byte, byte }; /* kind, coll, step, tag, receive id */
chan stash[2] = [6] of { mtype, byte, byte, byte, byte };  /* kind, coll, step, tag, payload */
byte cur[2];                  /* Sequence::started */
bool running[2];              /* Sequence::running not empty */
bool got[4];                  /* receive id 2r (collective) / 2r+1 (p2p) completed */
byte expect[4];               /* the payload it must get */
bool perr[2];                 /* a Protocol error was reported here */
bool aborted[2];              /* an abort notice arrived */
byte fin;                     /* threads finished */

#define STOPPED(r) (perr[r] || aborted[r])
#ifdef PEER_TAG_KEY           /* mutation: the broken key (source, tag) */
#define CLAIM(r, k, c, s, t, x) posted[r]??_, _, _, eval(t), x
#define HAS_POSTED(r, k, c, s, t) posted[r]??[_, _, _, eval(t), _]
#else                         /* the full key (match::keyOf) */
#define CLAIM(r, k, c, s, t, x) posted[r]??eval(k), eval(c), eval(s), eval(t), x
#define HAS_POSTED(r, k, c, s, t) posted[r]??[eval(k), eval(c), eval(s), eval(t), _]
#endif

/* A Protocol error: SequenceGuard::reportProtocol fails the running collective (or
 * poisons the next), whose failure aborts the world (abortAfterFailedCollective:
 * every operation here fails, the peer gets an abort notice). The model
 * stops the rank at once. */
inline protocolError(r) {
  printf("MODEL: rank %d reports a Protocol error\n", r);
  perr[r] = 1;
  do
  :: posted[r]?_, _, _, _, _
  :: empty(posted[r]) -> break
  od;
  link[1 - r]!ABORT, 0, 0, 0, 0
}

/* payload pl names its operation: < 64 collective #(pl % 16) of rank pl / 16,
 * else p2p message (pl % 16) of rank (pl - 64) / 16 */
inline deliver(x, pl) {
  if
  :: expect[x] < 64 && pl < 64 ->
     printf("MODEL: rank %d: the receive for collective #%d of rank %d gets collective #%d of rank %d\n",
            x / 2, expect[x] % 16, expect[x] / 16, pl % 16, pl / 16)
  :: expect[x] < 64 && pl >= 64 ->
     printf("MODEL: rank %d: the receive for collective #%d of rank %d gets p2p message %d of rank %d\n",
            x / 2, expect[x] % 16, expect[x] / 16, pl % 16, (pl - 64) / 16)
  :: expect[x] >= 64 && pl < 64 ->
     printf("MODEL: rank %d: the receive for p2p message %d of rank %d gets collective #%d of rank %d\n",
            x / 2, expect[x] % 16, (expect[x] - 64) / 16, pl % 16, pl / 16)
  :: else ->
     printf("MODEL: rank %d: the receive for p2p message %d of rank %d gets p2p message %d of rank %d\n",
            x / 2, expect[x] % 16, (expect[x] - 64) / 16, pl % 16, (pl - 64) / 16)
  fi;
  assert(pl == expect[x]);
  got[x] = 1
}

/* Calls::postRecv: an early frame under the key, else post it */
inline postRecv(r, k, c, s, t, x, pl) {
  expect[x] = pl;
  if
  :: stash[r]??[eval(k), eval(c), eval(s), eval(t), _] ->
     stash[r]??eval(k), eval(c), eval(s), eval(t), v; deliver(x, v)
  :: else -> posted[r]!k, c, s, t, x;
     printf("MODEL: rank %d posts a receive (kind %e, collective %d, step %d, tag %d)\n", r, k, c, s, t)
  fi
}

/* the collectives thread: Communicator::collective -> OpRun (CallSteps).
 * A collective's first handler sets it current, checks early frames against
 * it and runs the algorithm to its first settle(): post the receive, send
 * (the 2-rank barrier and all-to-all alike). */
proctype Coll(byte r) {
  byte i = 1, v;
  do
  :: i > NCOLL || STOPPED(r) -> break
  :: else ->
     atomic {
       cur[r] = i; running[r] = 1;          /* Calls::beginCollective */
       if
#ifndef NO_COLL_CHECK
       :: stash[r]??[COLL, eval(i), _, eval(OTHER(CODE(r, i))), _] ->
          protocolError(r)                  /* checkStashedAgainst: another op at this id */
#endif
       :: else ->
          got[2 * r] = 0;
          postRecv(r, COLL, i, 0, CODE(r, i), 2 * r, PL_COLL(1 - r, i));
          link[1 - r]!COLL, i, 0, CODE(r, i), PL_COLL(r, i);
          printf("MODEL: rank %d sends collective #%d (step 0, opcode %d)\n", r, i, CODE(r, i))
       fi;
       v = 0
     }
     (got[2 * r] || STOPPED(r));            /* settle() */
     atomic {              /* SequenceGuard::end: no frame of this collective left over */
       running[r] = 0;
       if
       :: !STOPPED(r) && stash[r]??[COLL, eval(i), _, _, _] -> protocolError(r)
       :: else
       fi;
       i++
     }
  od;
  fin++
}

/* point-to-point, rank 0 to rank 1: two sends with the same tag, two receives */
proctype P2PSend() {
  byte n = 1;
  do
  :: n > NP2P || STOPPED(0) -> break
  :: else -> atomic {                                              /* Calls::sendFrame */
       link[1]!P2P, 0, 0, PTAG, PL_P2P(0, n);
       printf("MODEL: rank 0 sends p2p message %d (tag %d)\n", n, PTAG); n++ }
  od;
  fin++
}

proctype P2PRecv() {
  byte n = 1, v;
  do
  :: n > NP2P || STOPPED(1) -> break
  :: else ->
     atomic { got[3] = 0; postRecv(1, P2P, 0, 0, PTAG, 3, PL_P2P(0, n)); v = 0 }   /* Calls::postRecv */
     (got[3] || STOPPED(1));
     n++
  od;
  fin++
}

/* LinkReader::pump -> Calls::onDataHeader (step 1), onDataComplete (step 2) */
proctype Reader(byte r) {
  mtype k; byte c, s, t, pl, x, v;
  bool toPosted;
end:
  do
  :: atomic {
       link[r]?k, c, s, t, pl;
       toPosted = 0;
       if
       :: k == ABORT -> aborted[r] = 1;
          do :: posted[r]?_, _, _, _, _ :: empty(posted[r]) -> break od
       :: k != ABORT && HAS_POSTED(r, k, c, s, t) -> CLAIM(r, k, c, s, t, x); toPosted = 1;
          printf("MODEL: rank %d: header (kind %e, collective %d, tag %d) arrives for a posted receive\n", r, k, c, t)
#ifndef NO_COLL_CHECK
       :: k == COLL && !HAS_POSTED(r, k, c, s, t) &&
          (c < cur[r] || (c == cur[r] && !running[r])) -> protocolError(r); k = ABORT  /* finished */
       :: k == COLL && !HAS_POSTED(r, k, c, s, t) && c == cur[r] && running[r] &&
          t != CODE(r, c) -> protocolError(r); k = ABORT                           /* other op */
#endif
       :: else ->
          printf("MODEL: rank %d: header (kind %e, collective %d, tag %d) arrives, no receive posted\n", r, k, c, t)
       fi
     }
     atomic {              /* the payload is in: deliver, or stash (checking again) */
       if
       :: k == ABORT
       :: toPosted -> deliver(x, pl)
#ifndef NO_RECHECK
       :: !toPosted && HAS_POSTED(r, k, c, s, t) -> CLAIM(r, k, c, s, t, x); deliver(x, pl)
#endif
       :: else ->
          if
          :: k == COLL && stash[r]??[eval(k), eval(c), eval(s), eval(t), _] -> protocolError(r)  /* twice */
          :: else -> stash[r]!k, c, s, t, pl;
             printf("MODEL: rank %d: frame (kind %e, collective %d, tag %d) read, stashed\n", r, k, c, t)
          fi
       fi;
       k = 0; c = 0; s = 0; t = 0; pl = 0; x = 0; toPosted = 0
     }
  od
}

init {
  atomic {
    run Reader(0); run Reader(1);
    run Coll(0); run Coll(1); run P2PSend(); run P2PRecv()
  }
  fin == 4;
#ifdef MISMATCH
  assert(perr[0] || perr[1]);            /* the mismatch is reported */
#else
  assert(!perr[0] && !perr[1] && !aborted[0] && !aborted[1]);
  assert(got[0] && got[2] && got[3])
#endif
}

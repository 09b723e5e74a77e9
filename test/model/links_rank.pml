/* links_rank.pml — one rank (a World on its progress thread) for links.pml.
 * Every branch of the loop is one handler; the comment above each names the
 * protocol step, docs/ordering.md "Checked model" names the code. */

/* the app: send frame sent+1 to p (Calls::sendFrame, small: queued, done) */
inline appSend(p) {
  sent[P(r, p)]++;
  printf("MODEL: rank %d sends frame %d to rank %d\n", r, sent[P(r, p)], p);
  if
  :: ls[P(r, p)] == L_FAILED -> err[P(r, p)] = 1
  :: else ->
     linkFor(p);
     if
     :: ls[P(r, p)] == L_UP -> wr(lc[P(r, p)], END_OF(lc[P(r, p)]), DATA, sent[P(r, p)])
     :: ls[P(r, p)] == L_DIALING -> q[P(r, p)]++
     :: else -> err[P(r, p)] = 1
     fi
  fi
}

/* the app: post the receive for p's frames (Calls::postRecv, point-to-point:
 * opens the link so that p's death shows) */
inline appPost(p) {
  posted[P(r, p)] = 1;
  printf("MODEL: rank %d posts its receive from rank %d\n", r, p);
  if
  :: ls[P(r, p)] == L_FAILED -> err[P(r, p)] = 1
  :: else -> linkFor(p)
  fi
}

/* link budget: close the link to p, which may be in use (R1, R2): goodbye
 * goes behind everything written, and nothing follows it on this connection */
inline idleClose(p) {
  c = lc[P(r, p)];
  wr(c, END_OF(c), BYE, 0);
  closes++;
  printf("MODEL: rank %d idle-closes conn %d to rank %d\n", r, c, p);
  old[P(r, p)] = c; ofl[P(r, p)] = O_SENT; ls[P(r, p)] = L_NONE; lc[P(r, p)] = NOC;
  ep[P(r, p)]++;
#ifdef NO_LINGER
  ofl[P(r, p)] = O_SENT | O_GOTACK;  /* mutation: close without waiting for the ack */
#endif
  oldCheck(p)
}

/* Connector::dialOnce, second half: the reply to our hello. A dial belongs to
 * the link object it was started for: once that object has been set aside
 * by an idle close (the epoch moved on), its outcome concerns nobody (R5). */
inline dialReply(c) {
  p = ca[c]; dw[c] = 0;
  if
  :: rst[c] || len(ch[2 * c + 1]) == 0 -> m = REJ_DUP     /* reset or EOF: a failed dial */
  :: else -> ch[2 * c + 1]?m, a
  fi;
  if
#ifdef NO_EPOCH
  :: m == WELCOME -> attach(p, c, 1)
#else
  :: m == WELCOME && dep[c] == ep[P(r, p)] -> attach(p, c, 1)
#endif
  :: else ->
     printf("MODEL: rank %d: reply %e on conn %d (dialled in epoch %d, now %d)\n", r, m, c, dep[c], ep[P(r, p)]);
     closeEnd(c, 0);
#ifndef NO_EPOCH
     assert(m != WELCOME);            /* R5: a stale dial is never welcomed */
#endif
     if
#ifndef NO_EPOCH
     :: dep[c] != ep[P(r, p)]          /* the outcome of a dial from an earlier epoch concerns nobody */
#endif
     :: m == REJ_SIM || m == REJ_STALE /* its dial becomes the link */
     :: else ->
        if
        :: ls[P(r, p)] == L_DIALING -> peerLost(p)
        :: else
        fi
     fi
  fi
}

/* Connector::serveIncoming + LinkAdmission::admit: read the hello, answer */
inline admit(c) {
  p = cd[c];
  if
  :: rst[c] -> cs[c] = C_DONE; closeEnd(c, 1)
  :: else ->
     ch[2 * c]?m, a;
     assert(m == HELLO);
     m = WELCOME;
#ifndef NO_EPOCH
#ifndef EARLY_REDIAL
     assert(a <= ep[P(r, p)]);        /* R3: we have set aside whatever it has */
#endif
     if :: a < ep[P(r, p)] -> m = REJ_STALE :: else fi;   /* dialled before a close we completed */
#endif
#ifdef CLOSE_LISTENER_AT_SHUTDOWN
     if :: m == WELCOME && shut[r] -> m = REJ_SHUT :: else fi;
#else
     if :: m == WELCOME && shut[r] && ls[P(r, p)] == L_NONE -> m = REJ_SHUT :: else fi;  /* R7 */
#endif
#ifndef NO_LOWER_WINS
     if :: m == WELCOME && ls[P(r, p)] == L_UP && dby[P(r, p)] && p > r -> m = REJ_SIM :: else fi;
#endif
     if :: m == WELCOME && (ls[P(r, p)] == L_FAILED || ls[P(r, p)] == L_UP) -> m = REJ_DUP :: else fi;
#ifndef NO_LOWER_WINS
     if :: m == WELCOME && ls[P(r, p)] == L_DIALING && p > r -> m = REJ_SIM :: else fi;
#endif
     if
     :: m == WELCOME ->
#ifndef NO_RESERVE
        if :: ls[P(r, p)] == L_NONE -> freshLink(p) :: else fi;  /* reserve */
#endif
        printf("MODEL: rank %d welcomes conn %d from rank %d\n", r, c, p);
        wr(c, 1, WELCOME, 0); cs[c] = C_WELCOMED
     :: else ->
        printf("MODEL: rank %d refuses conn %d from rank %d: %e\n", r, c, p, m);
        wr(c, 1, m, 0); closeEnd(c, 1); cs[c] = C_DONE
     fi
  fi
}

/* LinkReader::pump + Peers::onControlFrame on the link's connection */
inline readCur(c) {
  p = PEER_OF(c); e = END_OF(c);
  if
  :: rst[c] || len(ch[INCH(c)]) == 0 ->                      /* reset or EOF: Link::fail */
     closeEnd(c, e); peerLost(p)
  :: else ->
     ch[INCH(c)]?m, a;
     if
     :: m == DATA -> deliver(p, a)
     :: m == BYE && a == 1 ->                                          /* it shuts down */
        printf("MODEL: rank %d reads rank %d's final goodbye on conn %d\n", r, p, c);
        byeIn[P(r, p)] = 1; wr(c, e, ACK, 0)
     :: m == BYE && a == 0 ->          /* it idle-closes: ack; later frames take a new link (R1) */
        printf("MODEL: rank %d reads rank %d's idle goodbye on conn %d\n", r, p, c);
        wr(c, e, ACK, 0);
        old[P(r, p)] = c; lc[P(r, p)] = NOC; ls[P(r, p)] = L_NONE; ep[P(r, p)]++;
        ofl[P(r, p)] = O_GOTBYE | (byeOut[P(r, p)] -> O_SENT : 0) | (acked[P(r, p)] -> O_GOTACK : 0);
        oldCheck(p)
     :: m == ACK -> assert(byeOut[P(r, p)]); acked[P(r, p)] = 1;
        printf("MODEL: rank %d reads the ack of its final goodbye on conn %d\n", r, c)
     :: else -> assert(false)
     fi
  fi
}

/* the lingering connection after an idle close: read to the peer's last frame */
inline readOld(c) {
  p = PEER_OF(c); e = END_OF(c);
  if
  :: rst[c] || len(ch[INCH(c)]) == 0 ->                      /* it died before its last frame */
     closeEnd(c, e); old[P(r, p)] = NOC; ofl[P(r, p)] = 0;
     if :: ls[P(r, p)] != L_FAILED -> peerLost(p) :: else fi
  :: else ->
     ch[INCH(c)]?m, a;
     if
     :: m == DATA -> deliver(p, a)
     :: m == BYE ->                    /* both closed at once, or it shuts down meanwhile */
        wr(c, e, ACK, 0); ofl[P(r, p)] = ofl[P(r, p)] | O_GOTBYE;
        printf("MODEL: rank %d reads rank %d's goodbye on lingering conn %d\n", r, p, c)
     :: m == ACK -> ofl[P(r, p)] = ofl[P(r, p)] | O_GOTACK;
        printf("MODEL: rank %d reads the ack of its idle goodbye on conn %d\n", r, c)
     :: else -> assert(false)
     fi;
     oldCheck(p)
  fi
}

/* World::shutdownOnProgress -> Peers::sayGoodbye: goodbye on every link, queued behind frames on Dialing ones */
inline shutdown() {
  shut[r] = 1;
  printf("MODEL: rank %d shuts down\n", r);
#ifdef CLOSE_LISTENER_AT_SHUTDOWN
  listening[r] = 0;
#endif
  for (i : 0 .. N - 1) {
    if
    :: i != r && ls[P(r, i)] == L_UP && !byeOut[P(r, i)] ->
       wr(lc[P(r, i)], END_OF(lc[P(r, i)]), BYE, 1); byeOut[P(r, i)] = 1
    :: i != r && ls[P(r, i)] == L_DIALING -> qbye[P(r, i)] = 1
    :: else
    fi
  }
}

/* The app is done with p: all frames sent, all received or failed. */
#define APPDONE(p) ((p) == r || (sent[P(r, p)] == NFR(r, p) && (got[P(r, p)] == NFR(p, r) || err[P(r, p)])))
/* Peers::checkDrained per link: closed, or our goodbye acknowledged. */
#define DRAINED(p) ((p) == r || ((ls[P(r, p)] == L_NONE || ls[P(r, p)] == L_FAILED || \
                    (ls[P(r, p)] == L_UP && acked[P(r, p)])) && old[P(r, p)] == NOC))
#if N == 2
#define ALL(X) (X(0) && X(1))
#else
#define ALL(X) (X(0) && X(1) && X(2))
#endif

#ifdef NO_ADMIT_WAIT
#define ADMIT_OK(k) 1
#else
#define ADMIT_OK(k) (old[P(r, cd[k])] == NOC)  /* R4: a successor waits for the old connection */
#endif

/* Events a rank can take now. The loop picks one of the enabled ones
 * (spin tries each) and runs its handler, all in one atomic step. */
#define EV_SEND 1
#define EV_POST 2
#define EV_CLOSE 3
#define EV_REPLY 4
#define EV_ADMIT 5
#define EV_ATTACH 6
#define EV_CUR 7
#define EV_OLD 8
#define EV_SHUT 9
#define EV_END 10
#define EV_CRASH 11
#define PEV(k) \
  :: k != r && !shut[r] && sent[P(r, k)] < NFR(r, k) -> ev = EV_SEND; p = k \
  :: k != r && !shut[r] && !posted[P(r, k)] && got[P(r, k)] < NFR(k, r) -> ev = EV_POST; p = k \
  :: k != r && !shut[r] && closes < CLOSES && ls[P(r, k)] == L_UP && !byeIn[P(r, k)] && \
     old[P(r, k)] == NOC -> ev = EV_CLOSE; p = k
#define CEV(k) \
  :: cd[k] == r && dw[k] && READABLE(k) -> ev = EV_REPLY; c = k \
  :: ca[k] == r && cs[k] == C_PENDING && ADMIT_OK(k) -> ev = EV_ADMIT; c = k \
  :: ca[k] == r && cs[k] == C_WELCOMED -> ev = EV_ATTACH; c = k \
  :: MINE(k) && ls[P(r, PEER_OF(k))] == L_UP && lc[P(r, PEER_OF(k))] == k && READABLE(k) -> ev = EV_CUR; c = k \
  :: MINE(k) && old[P(r, PEER_OF(k))] == k && READABLE(k) -> ev = EV_OLD; c = k

proctype Rank(byte r) {
  byte p, c, e, a, i, nc, ev;
  mtype m;
  bool fl;
  do
  :: atomic {
       if
       PEV(0) PEV(1)
#if N > 2
       PEV(2)
#endif
       CEV(0) CEV(1)
#if NC > 2
       CEV(2) CEV(3)
#endif
#if NC > 4
       CEV(4) CEV(5)
#endif
#if NC > 6
       CEV(6) CEV(7)
#endif
#if NC > 8
       CEV(8) CEV(9)
#endif
#if NC > 10
       CEV(10) CEV(11)
#endif
       :: !shut[r] && ALL(APPDONE) -> ev = EV_SHUT
       :: shut[r] && ALL(DRAINED) -> ev = EV_END
       :: crashes < CRASHES -> ev = EV_CRASH        /* a rank dies, at any point */
       fi;
       if
       :: ev == EV_SEND -> appSend(p)
       :: ev == EV_POST -> appPost(p)
       :: ev == EV_CLOSE -> idleClose(p)
       :: ev == EV_REPLY -> dialReply(c)
       :: ev == EV_ADMIT -> admit(c)
       :: ev == EV_ATTACH -> cs[c] = C_DONE; p = cd[c]; attach(p, c, 0)  /* welcome written: LinkAdmission::connected */
       :: ev == EV_CUR -> readCur(c)
       :: ev == EV_OLD -> readOld(c)
       :: ev == EV_SHUT -> shutdown()
       :: ev == EV_END -> closeAll(); listening[r] = 0; break   /* drained: exit */
       :: ev == EV_CRASH ->              /* the kernel closes its sockets and its listener */
          crashed[r] = 1; crashes++; listening[r] = 0;
          printf("MODEL: rank %d dies\n", r); closeAll(); break
       fi;
       p = 0; c = 0; e = 0; a = 0; i = 0; nc = 0; ev = 0; m = 0 }  /* no stale temporaries in the state */
  /* timers: a receive's deadline, the drain timer. Only a wait on a dead
   * rank may end this way (P4); any other stall blocks here and spin
   * reports it as an invalid end state. */
  :: atomic { timeout ->
       fl = 0;
       for (i : 0 .. N - 1) {
         if
         :: !fl && i != r && crashed[i] && !shut[r] && got[P(r, i)] < NFR(i, r) && !err[P(r, i)] ->
            fl = 1; err[P(r, i)] = 1;
            printf("MODEL: rank %d: receive from dead rank %d times out\n", r, i)
         :: !fl && i != r && crashed[i] && shut[r] && !DRAINED(i) -> fl = 1
         :: else
         fi
       }
       fl;
       if
       :: shut[r] -> printf("MODEL: rank %d: drain timer\n", r); closeAll(); listening[r] = 0; break
       :: else
       fi;
       i = 0; fl = 0 }
  od
}

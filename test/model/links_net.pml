/* links_net.pml — sockets and link bookkeeping for links.pml (included
 * there; uses the rank process's locals r, e, i and nc). */

/* write(2) on end e of connection c. A frame to a closed peer is dropped by
 * the kernel, which answers with a reset. */
inline wr(c, e, m, a) {
  assert(!eclosed[2 * c + e]);
  if
  :: eclosed[2 * c + 1 - e] || rst[c] ->
     rst[c] = 1;
     printf("MODEL: rank %d drops %e on conn %d: peer end closed\n", r, m, c)
  :: else ->
     assert(len(ch[2 * c + e]) < CAP);
     ch[2 * c + e]!m, a
  fi
}

/* close(2) of end e: FIN after the data already written; with frames left
 * unread the kernel resets instead, and the reset destroys whatever the peer
 * has not read yet (the pessimistic reading of RST that the lingering close
 * exists to avoid). */
inline closeEnd(c, e) {
  if
  :: !eclosed[2 * c + e] ->
     eclosed[2 * c + e] = 1;
     if
     :: len(ch[2 * c + 1 - e]) > 0 ->
        rst[c] = 1;
        do :: len(ch[2 * c]) > 0 -> ch[2 * c]?_, _ :: else -> break od;
        do :: len(ch[2 * c + 1]) > 0 -> ch[2 * c + 1]?_, _ :: else -> break od
     :: else
     fi
  :: else
  fi
}

/* The process ends (finished or died): the kernel closes every socket. */
inline closeAll() {
  for (i : 0 .. NC - 1) {
    if
    :: cd[i] == r -> closeEnd(i, 0)
    :: ca[i] == r -> closeEnd(i, 1)
    :: else
    fi
  }
}

/* A fresh link object (Link::Link): nothing queued, nothing said. */
inline freshLink(p) {
  ls[P(r, p)] = L_DIALING; q[P(r, p)] = 0; qbye[P(r, p)] = 0; dby[P(r, p)] = 0;
  byeIn[P(r, p)] = 0; byeOut[P(r, p)] = 0; acked[P(r, p)] = 0; defer[P(r, p)] = 0
}

/* Peers::onLinkDown / connectFailed: the peer is gone for good, and the
 * operations that still need it fail: frames queued for it, a receive from
 * it. (Whether it said goodbye first only changes the message.) */
inline peerLost(p) {
  if
  :: !shut[r] && (q[P(r, p)] > 0 || (posted[P(r, p)] && got[P(r, p)] < NFR(p, r))) ->
     err[P(r, p)] = 1;
     printf("MODEL: rank %d: operation with rank %d fails (peer lost)\n", r, p)
  :: else
  fi;
  ls[P(r, p)] = L_FAILED; q[P(r, p)] = 0; qbye[P(r, p)] = 0; defer[P(r, p)] = 0
}

/* Connector::dialOnce, first half: connect(2) and the hello (the challenge round
 * trip adds nothing here and is folded into it). A rank whose listener is
 * closed refuses the connection. */
inline dial(p) {
  nc = nconn; nconn++;
  assert(nc < NC);
  cd[nc] = r; ca[nc] = p;
  if
  :: listening[p] ->
     cs[nc] = C_PENDING; dw[nc] = 1; dep[nc] = ep[P(r, p)]; ch[2 * nc]!HELLO, ep[P(r, p)];
     printf("MODEL: rank %d dials rank %d: conn %d\n", r, p, nc)
  :: else ->
     cs[nc] = C_DONE; eclosed[2 * nc] = 1; eclosed[2 * nc + 1] = 1;
     printf("MODEL: rank %d dials rank %d: refused\n", r, p);
     if
     :: ls[P(r, p)] == L_DIALING -> peerLost(p)
     :: else
     fi
  fi
}

/* Peers::linkFor: the link to p, opened on first use. After our idle close
 * the new link dials only once the lingering connection has finished (rule
 * R3), so that the peer has moved the old one aside before our hello. */
inline linkFor(p) {
  if
  :: ls[P(r, p)] == L_NONE ->
     freshLink(p);
     if
#ifndef EARLY_REDIAL
     :: old[P(r, p)] != NOC -> defer[P(r, p)] = 1
#endif
     :: else -> dial(p)
     fi
  :: else
  fi
}

/* LinkAdmission::connected + Link::attach: Dialing -> Up; frames queued meanwhile (and
 * shutdown's goodbye behind them) are written first. No link object: one is
 * made. A link that is Up or gone keeps what it has; this socket is closed. */
inline attach(p, c, byUs) {
  e = END_OF(c);
  if :: ls[P(r, p)] == L_NONE -> freshLink(p) :: else fi;
  if
  :: ls[P(r, p)] != L_DIALING ->
     printf("MODEL: rank %d closes conn %d: link to %d not Dialing\n", r, c, p);
     closeEnd(c, e)
  :: else ->
     assert(!(ls[P(p, r)] == L_UP && lc[P(p, r)] != c));          /* P1 */
     printf("MODEL: rank %d: link to rank %d up on conn %d\n", r, p, c);
     ls[P(r, p)] = L_UP; lc[P(r, p)] = c; dby[P(r, p)] = byUs;
     for (i : sent[P(r, p)] - q[P(r, p)] + 1 .. sent[P(r, p)]) { wr(c, e, DATA, i) }
     q[P(r, p)] = 0;
     if
     :: qbye[P(r, p)] -> wr(c, e, BYE, 1); qbye[P(r, p)] = 0; byeOut[P(r, p)] = 1
     :: else
     fi
  fi
}

/* The lingering connection to p: close it once finished (rule R2), then let
 * a dial that waited for it go (rule R3). */
inline oldCheck(p) {
  if
  :: FINISHED(P(r, p)) ->
     closeEnd(old[P(r, p)], END_OF(old[P(r, p)]));
     old[P(r, p)] = NOC; ofl[P(r, p)] = 0;
     if
     :: defer[P(r, p)] && ls[P(r, p)] == L_DIALING -> defer[P(r, p)] = 0; dial(p)
     :: else
     fi
  :: else
  fi
}

/* The app's data frame number a from p. */
inline deliver(p, a) {
  printf("MODEL: rank %d reads frame %d from rank %d on conn %d\n", r, a, p, c);
  assert(a == got[P(r, p)] + 1);                                     /* P2 */
  got[P(r, p)]++
}

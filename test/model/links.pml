/* links.pml — tether's links between ranks, checked with spin.
 *
 * Each rank is ONE process, like tether's World: one io_context thread runs
 * every handler to completion, so each `atomic` branch below is one handler
 * (a coroutine segment between two awaits). The network is a set of
 * connections; each has two FIFO channels (one per direction) standing for
 * TCP's ordered byte stream, plus FIN and RST flags. What the model covers:
 * dials at any moment (simultaneous ones included), connections accepted in
 * any order, the handshake with admission and reservation, the lower-rank-
 * wins rule, frames queued before and during set-up, the lingering close at
 * shutdown, the idle close and reopen of the link budget, and a rank dying
 * at any point (the kernel then closes its sockets: FIN, or RST when unread
 * data is left). docs/ordering.md "Checked model" maps each branch to lib/.
 *
 * Properties (assertions; spin also reports deadlocks as invalid end states):
 *  P1 both ends agree on the one connection they keep       (attach)
 *  P2 frames of a pair arrive exactly once and in order       (every DATA read)
 *  P3 no crash: every frame is delivered and nobody sees an error; a crash:
 *     a survivor that misses frames of the dead rank saw an error (init)
 *  P4 no crash: no timer is ever needed (drain timer, receive deadline), so
 *     every wait ends by the protocol itself; with a crash only waits on the
 *     dead rank may end by a timer (the `timeout` branches)
 *  P5 no crash: nothing left unread in any connection at the end (init)
 *
 * The rules R1-R8 for closing and reopening a link that the comments cite
 * are written out in docs/ordering.md ("Closing and reopening a link").
 *
 * Switches: N ranks (2 or 3), F frames per ordered pair (NF_UP lower->higher
 * and NF_DOWN higher->lower override it; STAR: only ranks 1..N-1 send, to
 * rank 0), CLOSES idle closes in a run, CRASHES ranks that may die.
 * Mutations, each of which spin must refute: NO_LOWER_WINS, NO_RESERVE,
 * EARLY_REDIAL, NO_ADMIT_WAIT, NO_LINGER, NO_EPOCH, and
 * CLOSE_LISTENER_AT_SHUTDOWN (today's shutdown, which R7 changes).
 */
#ifndef N
#define N 2
#endif
#ifndef F
#define F 2
#endif
#ifndef NF_UP
#define NF_UP F
#endif
#ifndef NF_DOWN
#define NF_DOWN F
#endif
#ifndef CLOSES
#define CLOSES 1
#endif
#ifndef CRASHES
#define CRASHES 1
#endif
/* connection slots: every dial takes a fresh one */
#ifndef NC
#define NC (N * (N - 1) * (CLOSES + 1))
#endif
#if NF_UP > NF_DOWN           /* channel room per direction: welcome + data + goodbye + ack */
#define CAP (NF_UP + 3)
#else
#define CAP (NF_DOWN + 3)
#endif
#if NC > 12
#error "links_rank.pml expands events for at most 12 connections"
#endif
#define NOC 255            /* no connection */
#define P(r, p) ((r) * N + (p))
#ifdef STAR                                       /* every other rank sends to rank 0 */
#define NFR(s, d) ((d) == 0 && (s) != 0 -> F : 0)
#else
#define NFR(s, d) ((s) < (d) -> NF_UP : NF_DOWN)   /* frames s sends to d */
#endif

mtype = { HELLO, WELCOME, REJ_SIM, REJ_DUP, REJ_SHUT, REJ_STALE, DATA, BYE, ACK };

/* ---- the network ---- */
chan ch[2 * NC] = [CAP] of { mtype, byte };  /* ch[2c]: dialer->acceptor, ch[2c+1]: back */
byte cd[NC], ca[NC];      /* dialer and acceptor rank of connection c */
byte cs[NC];              /* acceptor side: C_PENDING (in the backlog), C_WELCOMED, C_DONE */
bool dw[NC];              /* dialer side: waiting for the reply to its hello */
byte dep[NC];             /* the dialer's epoch with the acceptor when it dialled (in the hello) */
bool eclosed[2 * NC];     /* end e of c closed its socket (FIN): eclosed[2c+e], e 0 = dialer */
bool rst[NC];             /* connection reset */
byte nconn;
#define C_PENDING 1
#define C_WELCOMED 2
#define C_DONE 3

/* ---- each rank's view of each peer: index P(rank, peer) ---- */
#define L_NONE 0          /* no link object (never opened, or idle-closed) */
#define L_DIALING 1       /* link object exists, no connection attached yet */
#define L_UP 2
#define L_FAILED 3        /* peers_[p].gone: for good */
byte ls[N * N];
byte lc[N * N];           /* connection of an Up link */
bool dby[N * N];          /* Link::dialedByUs */
bool defer[N * N];        /* a dial waiting for the lingering connection to finish */
byte q[N * N];            /* data frames queued on a Dialing link (the last q sent) */
bool qbye[N * N];         /* shutdown's goodbye queued behind them */
bool byeIn[N * N];        /* peer's final goodbye read (LingeringClose::goodbyeRead) */
bool byeOut[N * N];       /* our final goodbye written on the Up link */
bool acked[N * N];        /* its GoodbyeAck read (LingeringClose::ackWasRead) */
byte ep[N * N];           /* epoch: connections to p set aside by idle closes (R5) */
byte old[N * N];          /* connection lingering after an idle close */
byte ofl[N * N];          /* its state: O_SENT | O_GOTBYE | O_GOTACK */
#define O_SENT 1
#define O_GOTBYE 2
#define O_GOTACK 4
byte sent[N * N], got[N * N];
bool posted[N * N];       /* the app's receive from that peer is posted */
bool err[N * N];          /* an operation of this rank involving that peer failed */
bool shut[N], crashed[N], listening[N];
byte closes, crashes;

#define PEER_OF(c) (cd[c] == r -> ca[c] : cd[c])
#define END_OF(c) (cd[c] == r -> 0 : 1)
#define MINE(c) (cd[c] == r || ca[c] == r)
#define INCH(c) (2 * (c) + 1 - END_OF(c))          /* channel this rank reads */
#define READABLE(c) (len(ch[INCH(c)]) > 0 || rst[c] || eclosed[INCH(c)])
/* a lingering connection is finished when the peer's last frame was read:
 * our goodbye's ack if we sent one, else the peer's goodbye */
#define FINISHED(x) ((ofl[x] & O_SENT) -> (ofl[x] & O_GOTACK) : (ofl[x] & O_GOTBYE))

#include "links_net.pml"
#include "links_rank.pml"

init {
  byte i, j, c;
  atomic {
    for (i : 0 .. N * N - 1) { lc[i] = NOC; old[i] = NOC }
    for (i : 0 .. NC - 1) { cd[i] = NOC; ca[i] = NOC }
    for (i : 0 .. N - 1) { listening[i] = 1 }
    for (i : 0 .. N - 1) { run Rank(i) }
  }
  (_nr_pr == 1);   /* every rank has ended (finished or died) */
  atomic {         /* the checks at the end, as one step */
    for (i : 0 .. N - 1) {
      for (j : 0 .. N - 1) {
        if
        :: i != j && !crashed[i] && (got[P(i, j)] != NFR(j, i) || err[P(i, j)]) ->
           printf("MODEL: end: rank %d read %d of the %d frames rank %d sent it; an operation with rank %d failed: %d\n",
                  i, got[P(i, j)], NFR(j, i), j, j, err[P(i, j)]);
           if
           :: !crashed[j] -> assert(got[P(i, j)] == NFR(j, i) && !err[P(i, j)])   /* P3 */
           :: else -> assert(got[P(i, j)] == NFR(j, i) || err[P(i, j)])           /* P3 */
           fi
        :: else
        fi
      }
    }
    if
    :: crashes == 0 -> for (c : 0 .. 2 * NC - 1) { assert(len(ch[c]) == 0) }   /* P5 */
    :: else
    fi;
    printf("MODEL: end: crashes %d idle closes %d connections %d\n", crashes, closes, nconn)
  }
}

/* tether/tether.h — the C ABI of tether (C11; usable from C++ too).
 *
 * The same bootstrap as tether::TcpBootstrap (include/tether/tcp_bootstrap.hpp,
 * docs/design.md) behind an opaque handle, for runtimes written in C and for
 * plug-ins loaded with dlopen. Link with -ltether (pkg-config tether, or CMake
 * find_package(tether) -> tether::tether; docs/integration.md).
 *
 * Conventions:
 *  - Every function returns a tether_result_t: TETHER_SUCCESS (0) or an error
 *    code that mirrors tether::ErrorCode. On an error, tether_last_error()
 *    returns the message on the calling thread, naming rank, peer and operation
 *    ("rank 3: allgather#12: timed out waiting for step 1 from rank 5 ...").
 *  - No C++ exception ever crosses this boundary (out of memory included: it is
 *    TETHER_ERR_SYSTEM with the message "out of memory").
 *  - A NULL handle, a NULL out-pointer or a NULL buffer with a non-zero size is
 *    TETHER_ERR_INVALID_ARGUMENT; nothing is dereferenced.
 *  - Every blocking call honours the communicator's timeout (tether_set_timeout)
 *    and fails with TETHER_ERR_TIMEOUT when it passes; tether_abort() ends every
 *    pending and future call on every rank with TETHER_ERR_ABORTED.
 *  - Threading and ordering are those of tether::Bootstrap: send/recv are
 *    thread-safe; collectives of one communicator are called in the same order
 *    on every rank, one at a time (one called while another thread's collective
 *    on the same communicator is in progress is TETHER_ERR_INVALID_ARGUMENT;
 *    docs/design.md, "Threads"). */
#ifndef TETHER_TETHER_H
#define TETHER_TETHER_H

#include <stddef.h>
#include <stdint.h>

#include "tether/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- results and errors ---- */

typedef enum tether_result {
  TETHER_SUCCESS = 0,
  TETHER_ERR_TIMEOUT = 1,          /* a deadline passed before the operation completed */
  TETHER_ERR_ABORTED = 2,          /* abort on this rank, or an abort notice from a peer */
  TETHER_ERR_PEER_LOST = 3,        /* a peer's connection closed or it stopped answering */
  TETHER_ERR_PROTOCOL = 4,         /* a peer broke the wire contract (or called another collective) */
  TETHER_ERR_INVALID_ARGUMENT = 5, /* the caller passed something unusable */
  TETHER_ERR_SYSTEM = 6            /* the operating system refused (socket, bind, fds, memory, ...) */
} tether_result_t;

/* The message of the last call that failed on this thread ("" if none has).
 * Successful calls leave it alone. Valid until the next tether call on this thread. */
const char* tether_last_error(void);
/* "TETHER_SUCCESS", "TETHER_ERR_TIMEOUT", ...; "TETHER_ERR_UNKNOWN" for other values. */
const char* tether_result_string(tether_result_t result);

/* ---- version ---- */

/* TETHER_VERSION_MAJOR * 10000 + MINOR * 100 + PATCH of the library linked at
 * run time (compare with TETHER_VERSION from tether/version.h). */
int tether_version(void);
/* "MAJOR.MINOR.PATCH" of the library linked at run time. */
const char* tether_version_string(void);

/* ---- unique id: the 128 bytes that let ranks find each other ---- */

#define TETHER_UNIQUE_ID_BYTES 128
/* 256 hex characters and the terminating NUL. */
#define TETHER_UNIQUE_ID_STRING_BYTES 257

typedef struct tether_unique_id {
  unsigned char bytes[TETHER_UNIQUE_ID_BYTES];
} tether_unique_id_t;

/* A new id whose root is this host on a free port, bound now and kept open so
 * that rank 0 in this process or a forked child adopts it. */
tether_result_t tether_unique_id_create(tether_unique_id_t* id);
/* A new id for the root "host:port" ("[v6addr]:port"); port 0 binds a free port as above. */
tether_result_t tether_unique_id_create_at(const char* root_host_port, tether_unique_id_t* id);
/* An id derived from "host:port" alone (all ranks compute the same one); the secret
 * comes from TETHER_SECRET, else from the address (docs/security.md). */
tether_result_t tether_unique_id_from_root(const char* root_host_port, tether_unique_id_t* id);
/* Closes the port tether_unique_id_create reserved in this process (a launcher
 * that forked the ranks and does not run rank 0 itself). */
tether_result_t tether_unique_id_forget(const tether_unique_id_t* id);
/* Writes 256 lowercase hex characters and a NUL; buf_size >= TETHER_UNIQUE_ID_STRING_BYTES. */
tether_result_t tether_unique_id_to_string(const tether_unique_id_t* id, char* buf, size_t buf_size);
/* Parses and validates (magic, version, checksum); trailing whitespace is ignored. */
tether_result_t tether_unique_id_from_string(const char* text, tether_unique_id_t* id);

/* ---- options ---- */

/* Called once with this rank's real listener "host:port" before it registers;
 * returns the "host:port" peers should dial instead (a NAT mapping, a proxy),
 * or NULL to keep the listener's. The string is copied before the call returns. */
typedef const char* (*tether_advertise_fn)(const char* listen_host_port, void* context);

typedef struct tether_options {
  size_t struct_size;                /* sizeof(tether_options_t); set by tether_options_init */
  int64_t timeout_ms;                /* construction and per-call deadline; 0: TETHER_TIMEOUT_MS, else 300000 */
  const char* listen_host;           /* address to listen on; NULL or "": chosen (docs/configuration.md) */
  const char* advertise;             /* "host:port" to register instead of the listener's; NULL or "": none */
  tether_advertise_fn advertise_for; /* takes precedence over advertise; NULL: none */
  void* advertise_context;           /* passed to advertise_for */
} tether_options_t;

/* Fills the defaults (all zero / NULL) and struct_size. */
void tether_options_init(tether_options_t* options);

/* ---- communicators ---- */

typedef struct tether_comm tether_comm_t;

/* Pass as color to tether_split() to get no child communicator. */
#define TETHER_NO_COLOR (-1)

/* Joins the world of `nranks` ranks as `rank`; returns when every rank has
 * registered. `options` may be NULL. On failure *comm is set to NULL. */
tether_result_t tether_init(int rank, int nranks, const tether_unique_id_t* id, const tether_options_t* options,
                            tether_comm_t** comm);
/* Rank, size and root from the launch environment (TETHER_RANK/TETHER_NRANKS/
 * TETHER_UID|TETHER_UID_FILE|TETHER_ROOT, torchrun, Open MPI, PMI, Slurm:
 * docs/configuration.md). `options` may be NULL. */
tether_result_t tether_init_from_env(const tether_options_t* options, tether_comm_t** comm);
/* Flushes pending sends, says goodbye to connected peers and frees the handle
 * (links stay open while a child from tether_split still uses them). NULL is a no-op. */
tether_result_t tether_finalize(tether_comm_t* comm);

tether_result_t tether_comm_rank(const tether_comm_t* comm, int* rank);
tether_result_t tether_comm_size(const tether_comm_t* comm, int* size);
/* This process's rank in the world communicator. */
tether_result_t tether_comm_world_rank(const tether_comm_t* comm, int* world_rank);
/* Topology (no communication; a node is a host: docs/design.md, "Host
 * identity"). Ranks of this communicator on this rank's node, this rank
 * included; this rank's index among them; this rank's node (nodes numbered by
 * their lowest rank) and the number of nodes. */
tether_result_t tether_comm_nranks_per_node(const tether_comm_t* comm, int* nranks_per_node);
tether_result_t tether_comm_local_rank(const tether_comm_t* comm, int* local_rank);
tether_result_t tether_comm_node_id(const tether_comm_t* comm, int* node_id);
tether_result_t tether_comm_nnodes(const tether_comm_t* comm, int* nnodes);
/* Where `peer` runs: its host address ("10.0.0.7") or its advertised listen
 * address ("10.0.0.7:41235"), written with a terminating NUL into buf[0..len);
 * TETHER_ERR_INVALID_ARGUMENT if it does not fit. */
tether_result_t tether_comm_peer_host(const tether_comm_t* comm, int peer, char* buf, size_t len);
tether_result_t tether_comm_peer_address(const tether_comm_t* comm, int peer, char* buf, size_t len);

/* Point-to-point; non-negative tags; `bytes` equal on both sides. */
tether_result_t tether_send(tether_comm_t* comm, const void* data, size_t bytes, int peer, int tag);
tether_result_t tether_recv(tether_comm_t* comm, void* data, size_t bytes, int peer, int tag);

/* In place: rank r's block is at all_data + r * bytes_per_rank on entry. */
tether_result_t tether_allgather(tether_comm_t* comm, void* all_data, size_t bytes_per_rank);
/* Block i of send_data goes to rank i; block j of recv_data comes from rank j. No overlap. */
tether_result_t tether_alltoall(tether_comm_t* comm, const void* send_data, void* recv_data, size_t bytes_per_rank);
/* Counts and displacements in bytes, one entry per rank. */
tether_result_t tether_alltoallv(tether_comm_t* comm, const void* send_data, const size_t* send_counts,
                                 const size_t* send_displs, void* recv_data, const size_t* recv_counts,
                                 const size_t* recv_displs);
tether_result_t tether_broadcast(tether_comm_t* comm, void* data, size_t bytes, int root);
tether_result_t tether_barrier(tether_comm_t* comm);
/* Barrier over `count` listed ranks; only they call it, all with the same list
 * (any order, no duplicates, including the caller). */
tether_result_t tether_barrier_subset(tether_comm_t* comm, const int* ranks, size_t count);

/* Collective: ranks with the same color form a child ordered by (key, rank).
 * color TETHER_NO_COLOR sets *child to NULL. The child is finalized on its own
 * and stays valid after its parent is finalized. */
tether_result_t tether_split(tether_comm_t* comm, int color, int key, tether_comm_t** child);
/* Collective: the ranks of each node form a child, in rank order. */
tether_result_t tether_split_by_node(tether_comm_t* comm, tether_comm_t** child);

/* Thread-safe: ends every pending and future call on this rank and tells the
 * peers (they fail with TETHER_ERR_ABORTED naming this rank and `reason`:
 * its first 4 KiB, marked where it was cut).
 * Not async-signal-safe: from a signal handler, wake a thread that calls it
 * (docs/faults.md, "After fork, exec and signals"). In a forked child every
 * call on the parent's handle fails with TETHER_ERR_INVALID_ARGUMENT, and
 * tether_finalize only closes the child's copies of its sockets. */
tether_result_t tether_abort(tether_comm_t* comm, const char* reason);

/* Deadline of each blocking call on this communicator, milliseconds; 0
 * restores the default (TETHER_TIMEOUT_MS, else 300000); negative is
 * TETHER_ERR_INVALID_ARGUMENT. */
tether_result_t tether_set_timeout(tether_comm_t* comm, int64_t timeout_ms);
tether_result_t tether_get_timeout(const tether_comm_t* comm, int64_t* timeout_ms);

/* ---- what a communicator did (tether::InitTimings and tether::Counters in
 * tether/tcp_bootstrap.hpp have the full semantics) ----
 * Both structs may grow at their end: set struct_size to sizeof the struct
 * you compiled with; the library fills the fields that it covers and leaves
 * the rest alone (struct_size 0 is TETHER_ERR_INVALID_ARGUMENT). No
 * communication; thread-safe. */

/* A phase that did not happen (under this rendezvous, or not yet). */
#define TETHER_PHASE_ABSENT (-1)

/* When this rank's world came up: offsets in microseconds from the entry of
 * tether_init (steady clock), or TETHER_PHASE_ABSENT. A child of tether_split
 * reports its world's. */
typedef struct tether_init_timings {
  size_t struct_size;
  int64_t started_unix_us;   /* wall clock at tether_init's entry, microseconds since the Unix epoch */
  int64_t listen_us;         /* the listener is open */
  int64_t host_local_us;     /* host-local aggregation: the group met (absent without it) */
  int64_t registered_us;     /* this rank's registration left for the root (absent for a host-local member) */
  int64_t table_received_us; /* the rendezvous is complete */
  int64_t first_link_us;     /* the first link opened after the rendezvous (lazily: absent until a call needs one) */
  int64_t total_us;          /* tether_init returned */
} tether_init_timings_t;
tether_result_t tether_comm_init_timings(const tether_comm_t* comm, tether_init_timings_t* timings);

/* Counts since the communicator was made (always on). Calls started, by kind
 * (blocking and nonblocking alike); data frames and payload bytes of this
 * communicator sent to and read from links; calls that ended with
 * TETHER_ERR_TIMEOUT or TETHER_ERR_ABORTED. dials, redials and budget_closes
 * are the world's (links are shared by all its communicators). */
typedef struct tether_counters {
  size_t struct_size;
  uint64_t allgather, alltoall, alltoallv, broadcast, barrier, barrier_subset, split, send, recv;
  uint64_t frames_sent, bytes_sent, frames_received, bytes_received;
  uint64_t timeouts, aborts;
  uint64_t dials, redials, budget_closes;
} tether_counters_t;
tether_result_t tether_comm_counters(const tether_comm_t* comm, tether_counters_t* counters);

/* ---- nonblocking calls (tether/request.hpp has the full semantics) ----
 * Each starts the call and returns a request in *req (NULL on failure); the
 * arguments are checked, and a collective takes its id, when it starts, so
 * collectives (blocking or not) are started in the same order on every rank.
 * Buffers stay the caller's until the request is done. Several requests may
 * be outstanding at once. */
typedef struct tether_request tether_request_t;
tether_result_t tether_iallgather(tether_comm_t* comm, void* all_data, size_t bytes_per_rank, tether_request_t** req);
tether_result_t tether_ialltoall(tether_comm_t* comm, const void* send_data, void* recv_data, size_t bytes_per_rank,
                                 tether_request_t** req);
tether_result_t tether_ibarrier(tether_comm_t* comm, tether_request_t** req);
tether_result_t tether_isend(tether_comm_t* comm, const void* data, size_t bytes, int peer, int tag,
                             tether_request_t** req);
tether_result_t tether_irecv(tether_comm_t* comm, void* data, size_t bytes, int peer, int tag, tether_request_t** req);
/* Makes progress; *done = 1 once the call is done, else 0. Once tests stop
 * making progress, each waits for it in the kernel for at most 1 ms (so a
 * test loop costs what tether_wait does; tether/request.hpp).
 * A failed call is done: *done = 1 and its error is returned (again on every
 * later test or wait). Every request ends by the communicator's timeout,
 * counted from when it was started, as a blocking call does: a poller then
 * gets TETHER_ERR_TIMEOUT naming the rank it waited for, never "in progress"
 * forever (a lost rank ends it sooner, with TETHER_ERR_PEER_LOST). */
tether_result_t tether_test(tether_request_t* req, int* done);
/* Blocks (sleeping) until done; timeout_ms 0: the communicator's timeout;
 * when it passes the call fails with TETHER_ERR_TIMEOUT. */
tether_result_t tether_wait(tether_request_t* req, int64_t timeout_ms);
/* *cancelled = 1 if the call ended because of this (it then fails with
 * TETHER_ERR_ABORTED "cancelled"): an irecv not yet matched is withdrawn
 * cleanly; a collective fails here, its communicator is unusable for further
 * collectives and on the world communicator the peers get an abort notice;
 * an isend or a completed call is never cancelled (*cancelled = 0).
 * `cancelled` may be NULL. */
tether_result_t tether_cancel(tether_request_t* req, int* cancelled);
/* Frees the request; one not done is cancelled and waited for first. NULL is a no-op. */
tether_result_t tether_request_free(tether_request_t* req);

/* ---- UCC-style out-of-band allgather (ucc_oob_coll_t's allgather, req_test,
 * req_free; pass the tether_comm_t* as coll_info / oob.coll_info) ----
 * They return UCC's ucc_status_t values (ucc/api/ucc_status.h), so UCC's
 * ucc_status_string() names the failure; the message is in tether_last_error().
 * tether_oob_allgather: rank r's msglen bytes at sbuf end up at
 * rbuf + r * msglen on every rank (rbuf holds size * msglen bytes; sbuf may
 * equal rbuf + r * msglen). Returns 0 and a request in *req, or a negative
 * TETHER_OOB_ERR_* value.
 * tether_oob_req_test: 0 when done, TETHER_IN_PROGRESS while pending, a
 * negative TETHER_OOB_ERR_* value on failure. tether_oob_req_free: 0, or negative. */
#define TETHER_IN_PROGRESS 1              /* UCC_INPROGRESS */
#define TETHER_OOB_ERR_INVALID_PARAM (-3) /* UCC_ERR_INVALID_PARAM: TETHER_ERR_INVALID_ARGUMENT */
#define TETHER_OOB_ERR_NO_RESOURCE (-5)   /* UCC_ERR_NO_RESOURCE: TETHER_ERR_SYSTEM */
#define TETHER_OOB_ERR_NO_MESSAGE (-6)    /* UCC_ERR_NO_MESSAGE: TETHER_ERR_ABORTED, TETHER_ERR_PROTOCOL */
#define TETHER_OOB_ERR_TIMED_OUT (-8)     /* UCC_ERR_TIMED_OUT: TETHER_ERR_TIMEOUT */
#define TETHER_OOB_ERR_IO_ERROR (-9)      /* UCC_ERR_IO_ERROR: TETHER_ERR_PEER_LOST */
int tether_oob_allgather(void* sbuf, void* rbuf, size_t msglen, void* coll_info, void** req);
int tether_oob_req_test(void* req);
int tether_oob_req_free(void* req);

/* ---- logging (tether/log.hpp) ---- */

typedef enum tether_log_level {
  TETHER_LOG_NONE = 0,
  TETHER_LOG_WARN = 1,
  TETHER_LOG_INFO = 2,
  TETHER_LOG_TRACE = 3
} tether_log_level_t;

/* `line` is the whole message with its rank prefix, no newline. May be called
 * from tether's progress threads: must be thread-safe. */
typedef void (*tether_log_fn)(tether_log_level_t level, const char* line, void* context);

/* Overrides TETHER_DEBUG for this process. */
tether_result_t tether_set_log_level(tether_log_level_t level);
/* NULL restores the default (stderr). */
tether_result_t tether_set_log_handler(tether_log_fn handler, void* context);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TETHER_TETHER_H */

/* nvshmem_bootstrap.h — the NVSHMEM 3.x bootstrap plug-in contract, as the
 * plug-in sees it. Written from NVSHMEM's description of the interface (ABI
 * 3.0.0); private to the plug-in and its tests, not installed.
 *
 * The loader dlopen()s the plug-in, finds the two entry points with dlsym(),
 * calls pre-init (unique-id mode), later get_unique_id() on one rank, then init
 * on every rank. Every function returns 0 on success. */
#ifndef TETHER_NVSHMEM_BOOTSTRAP_H
#define TETHER_NVSHMEM_BOOTSTRAP_H

#include "tether/tether.h"

#ifdef __cplusplus
extern "C" {
#endif

/* major * 10000 + minor * 100 + patch; compatible when the majors are equal. */
#define TETHER_NVSHMEM_ABI_VERSION 30000
#define TETHER_NVSHMEM_ABI_MAJOR(v) ((v) / 10000)

/* NVSHMEM's unique id: an int version, then 124 bytes that belong to the plug-in. */
#define TETHER_NVSHMEM_UID_BYTES 128
#define TETHER_NVSHMEM_UID_VERSION ((1 << 16) + TETHER_NVSHMEM_UID_BYTES)

struct bootstrap_handle;

typedef struct bootstrap_init_ops {
  void* cookie;
  /* `uid` points at the 128-byte unique id to fill, version included (callers
   * may pass it uninitialised). */
  int (*get_unique_id)(void* uid);
} bootstrap_init_ops_t;

typedef struct bootstrap_handle {
  int version;   /* the plug-in's ABI version, set by init */
  int pg_rank;   /* this rank */
  int pg_size;   /* number of ranks */
  int mype_node; /* this rank's index among the ranks on its host */
  int npes_node; /* ranks on this host */
  /* Not in place: `bytes` from each rank land at recvbuf + rank * bytes. */
  int (*allgather)(const void* sendbuf, void* recvbuf, int bytes, struct bootstrap_handle* handle);
  /* Block i of sendbuf goes to rank i; block j of recvbuf comes from rank j. */
  int (*alltoall)(const void* sendbuf, void* recvbuf, int bytes, struct bootstrap_handle* handle);
  int (*barrier)(struct bootstrap_handle* handle);
  /* Aborts every rank (they fail naming this one) and exits with `status`. */
  void (*global_exit)(int status);
  int (*finalize)(struct bootstrap_handle* handle);
  int (*show_info)(struct bootstrap_handle* handle, int style);
  bootstrap_init_ops_t* pre_init_ops;
  void* comm_state;
} bootstrap_handle_t;

/* What init's `arg` points at in unique-id mode (24 bytes on LP64). */
typedef struct bootstrap_uid_args {
  int version;
  void* id; /* the 128-byte unique id */
  int myrank;
  int nranks;
} bootstrap_uid_args_t;

/* The two entry points (found with dlsym). */
int nvshmemi_bootstrap_plugin_pre_init(bootstrap_handle_t* handle, int abi_version);
int nvshmemi_bootstrap_plugin_init(void* arg, bootstrap_handle_t* handle, int abi_version);

/* tether's extensions — NVSHMEM never calls them; a host that loads the plug-in
 * itself may (docs/integration.md):
 * Options for the next init in this process (a copy of the struct is kept; its
 * strings and advertise_context must stay valid until that init returns). NULL
 * clears them. */
int tether_nvshmem_set_options(const tether_options_t* options);
/* The message of the last failure on this thread ("" if none). */
const char* tether_nvshmem_last_error(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TETHER_NVSHMEM_BOOTSTRAP_H */

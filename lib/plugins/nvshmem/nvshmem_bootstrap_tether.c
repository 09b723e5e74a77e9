/* nvshmem_bootstrap_tether.so.3 — an NVSHMEM 3.x bootstrap plug-in on tether's C ABI.
 *
 * NVSHMEM's unique-id bootstrap opens a TCP connection per message and matches
 * by (peer, tag); this plug-in gives NVSHMEM tether instead: one ordered stream
 * per peer pair, every frame naming its operation (docs/design.md).
 *
 * The unique id: NVSHMEM's is 128 bytes, the first 4 its own version, so 124
 * belong to the plug-in. tether's id is 128 bytes whose first 4 are the
 * constant magic "TUID" (docs/wire-protocol.md); the plug-in stores the other
 * 124 and puts the magic back before joining. tether_init validates the result
 * (version, checksum), so a damaged id is an error, never a wrong root. */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvshmem_bootstrap.h"
#include "tether/tether.h"

#define EXPORT __attribute__((visibility("default")))
#define PLUGIN "nvshmem_bootstrap_tether"

static const unsigned char kTetherIdMagic[4] = {'T', 'U', 'I', 'D'};
enum { kIdHead = 4 };

static _Thread_local char last_error[1024];
/* One bootstrap per process: global_exit gets no handle. */
static tether_comm_t* current_comm;
/* Every pre_init_ops this plug-in allocated: finalize frees the one its
 * handle holds, unloading the plug-in frees the rest. */
typedef struct owned_ops {
  bootstrap_init_ops_t ops; /* first: &node->ops == node */
  struct owned_ops* next;
} owned_ops_t;
static owned_ops_t* owned;
static tether_options_t host_options;
static int have_host_options;
/* Every id get_unique_id made in this process: each holds a reserved root
 * port until rank 0's init adopts it. finalize (and unloading) releases the
 * ones no init used, so a second, unused id leaves no port open. */
typedef struct made_id {
  tether_unique_id_t id;
  struct made_id* next;
} made_id_t;
static made_id_t* made_ids;

/* Closes the ports of the ids no init adopted (tether_unique_id_forget is a
 * no-op for an adopted one). */
static void forget_made_ids(void) {
  while (made_ids) {
    made_id_t* next = made_ids->next;
    tether_unique_id_forget(&made_ids->id);
    free(made_ids);
    made_ids = next;
  }
}

/* Records and prints the failure; returns `code` (never 0). */
static int fail(int code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(last_error, sizeof last_error, format, args);
  va_end(args);
  fprintf(stderr, PLUGIN ": %s\n", last_error);
  return code;
}

/* A tether call failed: keep its message, which names rank, peer and operation. */
static int fail_tether(tether_result_t result, const char* what) {
  return fail((int)result, "%s: %s (%s)", what, tether_last_error(), tether_result_string(result));
}

static int check_abi(int abi_version, const char* function) {
  if (TETHER_NVSHMEM_ABI_MAJOR(abi_version) != TETHER_NVSHMEM_ABI_MAJOR(TETHER_NVSHMEM_ABI_VERSION))
    return fail(TETHER_ERR_INVALID_ARGUMENT,
                "%s: loader ABI version %d (%d.%d.%d) is incompatible with this plug-in's %d (3.0.0): majors differ",
                function, abi_version, abi_version / 10000, abi_version / 100 % 100, abi_version % 100,
                TETHER_NVSHMEM_ABI_VERSION);
  return 0;
}

/* Only init reads a caller's id; get_unique_id writes the whole id, whatever the caller left in it. */
static int check_uid(const void* uid, const char* function) {
  int version;
  if (!uid) return fail(TETHER_ERR_INVALID_ARGUMENT, "%s: unique id is NULL", function);
  memcpy(&version, uid, sizeof version);
  if (version != TETHER_NVSHMEM_UID_VERSION)
    return fail(TETHER_ERR_INVALID_ARGUMENT, "%s: unique id version %d, expected %d ((1 << 16) + 128)", function,
                version, TETHER_NVSHMEM_UID_VERSION);
  return 0;
}

/* The communicator of an initialised handle, or NULL after recording why not. */
static tether_comm_t* comm_of(bootstrap_handle_t* handle, const char* function) {
  if (!handle) {
    fail(TETHER_ERR_INVALID_ARGUMENT, "%s: handle is NULL", function);
    return NULL;
  }
  if (!handle->comm_state)
    fail(TETHER_ERR_INVALID_ARGUMENT, "%s: the handle is not initialised (or finalized)", function);
  return (tether_comm_t*)handle->comm_state;
}

static int check_bytes(bootstrap_handle_t* handle, const void* sendbuf, void* recvbuf, int bytes,
                       const char* function) {
  if (bytes < 0)
    return fail(TETHER_ERR_INVALID_ARGUMENT, "rank %d: %s: negative size %d", handle->pg_rank, function, bytes);
  if (bytes > 0 && (!sendbuf || !recvbuf))
    return fail(TETHER_ERR_INVALID_ARGUMENT, "rank %d: %s: %s is NULL for %d bytes", handle->pg_rank, function,
                sendbuf ? "recvbuf" : "sendbuf", bytes);
  return 0;
}

/* ---- the operations NVSHMEM calls ---- */

static int op_allgather(const void* sendbuf, void* recvbuf, int bytes, bootstrap_handle_t* handle) {
  tether_comm_t* comm = comm_of(handle, "allgather");
  if (!comm) return TETHER_ERR_INVALID_ARGUMENT;
  int rc = check_bytes(handle, sendbuf, recvbuf, bytes, "allgather");
  if (rc) return rc;
  unsigned char* mine = (unsigned char*)recvbuf + (size_t)handle->pg_rank * (size_t)bytes;
  if (bytes > 0 && mine != sendbuf) memmove(mine, sendbuf, (size_t)bytes);
  tether_result_t r = tether_allgather(comm, recvbuf, (size_t)bytes);
  return r == TETHER_SUCCESS ? 0 : fail_tether(r, "allgather");
}

static int op_alltoall(const void* sendbuf, void* recvbuf, int bytes, bootstrap_handle_t* handle) {
  tether_comm_t* comm = comm_of(handle, "alltoall");
  if (!comm) return TETHER_ERR_INVALID_ARGUMENT;
  int rc = check_bytes(handle, sendbuf, recvbuf, bytes, "alltoall");
  if (rc) return rc;
  size_t total = (size_t)handle->pg_size * (size_t)bytes;
  const unsigned char* s = sendbuf;
  unsigned char* d = recvbuf;
  void* copy = NULL;
  if (total > 0 && s < d + total && d < s + total) { /* tether wants disjoint buffers */
    copy = malloc(total);
    if (!copy) return fail(TETHER_ERR_SYSTEM, "rank %d: alltoall: out of memory", handle->pg_rank);
    memcpy(copy, sendbuf, total);
    sendbuf = copy;
  }
  tether_result_t r = tether_alltoall(comm, sendbuf, recvbuf, (size_t)bytes);
  free(copy);
  return r == TETHER_SUCCESS ? 0 : fail_tether(r, "alltoall");
}

static int op_barrier(bootstrap_handle_t* handle) {
  tether_comm_t* comm = comm_of(handle, "barrier");
  if (!comm) return TETHER_ERR_INVALID_ARGUMENT;
  tether_result_t r = tether_barrier(comm);
  return r == TETHER_SUCCESS ? 0 : fail_tether(r, "barrier");
}

static void op_global_exit(int status) {
  if (current_comm) {
    int rank = -1;
    char reason[96];
    tether_comm_rank(current_comm, &rank);
    snprintf(reason, sizeof reason, "NVSHMEM global_exit(%d) on rank %d", status, rank);
    tether_abort(current_comm, reason);
    /* Finalize flushes the abort notice to the peers before the process goes. */
    tether_finalize(current_comm);
    current_comm = NULL;
  }
  exit(status);
}

static int op_finalize(bootstrap_handle_t* handle) {
  if (!handle) return fail(TETHER_ERR_INVALID_ARGUMENT, "finalize: handle is NULL");
  tether_comm_t* comm = handle->comm_state;
  handle->comm_state = NULL;
  if (comm == current_comm) current_comm = NULL;
  for (owned_ops_t** link = &owned; *link; link = &(*link)->next) {
    if (&(*link)->ops != handle->pre_init_ops) continue;
    owned_ops_t* node = *link;
    *link = node->next;
    free(node);
    handle->pre_init_ops = NULL;
    break;
  }
  tether_result_t r = tether_finalize(comm);
  forget_made_ids();
  return r == TETHER_SUCCESS ? 0 : fail_tether(r, "finalize");
}

static int op_show_info(bootstrap_handle_t* handle, int style) {
  tether_comm_t* comm = comm_of(handle, "show_info");
  if (!comm) return TETHER_ERR_INVALID_ARGUMENT;
  int64_t timeout = 0;
  tether_get_timeout(comm, &timeout);
  printf(PLUGIN " (tether %s, plug-in ABI %d, style %d): rank %d of %d, %d of %d on this host, timeout %lld ms\n",
         tether_version_string(), TETHER_NVSHMEM_ABI_VERSION, style, handle->pg_rank, handle->pg_size,
         handle->mype_node, handle->npes_node, (long long)timeout);
  fflush(stdout);
  return 0;
}

/* ---- pre-init: the unique id ---- */

/* Writes all 128 bytes (NVSHMEM's version, then tether's id without its magic):
 * callers such as DeepEP pass an id they never initialised. */
static int get_unique_id(void* uid) {
  if (!uid) return fail(TETHER_ERR_INVALID_ARGUMENT, "get_unique_id: unique id is NULL");
  made_id_t* made = calloc(1, sizeof *made);
  if (!made) return fail(TETHER_ERR_SYSTEM, "get_unique_id: out of memory");
  tether_result_t r = tether_unique_id_create(&made->id);
  if (r != TETHER_SUCCESS) {
    free(made);
    return fail_tether(r, "get_unique_id");
  }
  made->next = made_ids;
  made_ids = made;
  if (memcmp(made->id.bytes, kTetherIdMagic, kIdHead) != 0)
    return fail(TETHER_ERR_SYSTEM, "get_unique_id: this tether's ids do not start with \"TUID\"; rebuild the plug-in");
  const int version = TETHER_NVSHMEM_UID_VERSION;
  memcpy(uid, &version, sizeof version);
  memcpy((unsigned char*)uid + kIdHead, made->id.bytes + kIdHead, TETHER_UNIQUE_ID_BYTES - kIdHead);
  return 0;
}

EXPORT int nvshmemi_bootstrap_plugin_pre_init(bootstrap_handle_t* handle, int abi_version) {
  int rc = check_abi(abi_version, "pre_init");
  if (rc) return rc;
  if (!handle) return fail(TETHER_ERR_INVALID_ARGUMENT, "pre_init: handle is NULL");
  if (!handle->pre_init_ops) {
    owned_ops_t* node = calloc(1, sizeof *node);
    if (!node) return fail(TETHER_ERR_SYSTEM, "pre_init: out of memory");
    node->next = owned;
    owned = node;
    handle->pre_init_ops = &node->ops;
  }
  handle->pre_init_ops->cookie = NULL;
  handle->pre_init_ops->get_unique_id = get_unique_id;
  return 0;
}

/* The ids' nodes only: at process exit libtether's reservations may already be
 * gone (the kernel closes their sockets). */
__attribute__((destructor)) static void free_owned_ops(void) {
  while (made_ids) {
    made_id_t* next = made_ids->next;
    free(made_ids);
    made_ids = next;
  }
  while (owned) {
    owned_ops_t* next = owned->next;
    free(owned);
    owned = next;
  }
}

/* ---- init ---- */

/* This rank's index among the ranks on its host, and their number: tether's
 * topology (docs/design.md, "Host identity"), not the host name alone. */
static int node_ranks(tether_comm_t* comm, int* mype_node, int* npes_node) {
  tether_result_t r = tether_comm_local_rank(comm, mype_node);
  if (r == TETHER_SUCCESS) r = tether_comm_nranks_per_node(comm, npes_node);
  return r == TETHER_SUCCESS ? 0 : fail_tether(r, "init: the ranks of this node");
}

EXPORT int nvshmemi_bootstrap_plugin_init(void* arg, bootstrap_handle_t* handle, int abi_version) {
  int rc = check_abi(abi_version, "init");
  if (rc) return rc;
  if (!handle) return fail(TETHER_ERR_INVALID_ARGUMENT, "init: handle is NULL");
  if (!arg) return fail(TETHER_ERR_INVALID_ARGUMENT, "init: arg is NULL (unique-id mode needs rank, size and id)");
  const bootstrap_uid_args_t* args = arg;
  if ((rc = check_uid(args->id, "init"))) return rc;
  if (args->nranks < 1 || args->myrank < 0 || args->myrank >= args->nranks)
    return fail(TETHER_ERR_INVALID_ARGUMENT, "init: rank %d of %d ranks is not valid", args->myrank, args->nranks);
  if (current_comm)
    return fail(TETHER_ERR_INVALID_ARGUMENT, "rank %d: init: already initialised (finalize first)", args->myrank);

  tether_unique_id_t id;
  memcpy(id.bytes, kTetherIdMagic, kIdHead);
  memcpy(id.bytes + kIdHead, (const unsigned char*)args->id + kIdHead, TETHER_UNIQUE_ID_BYTES - kIdHead);
  tether_comm_t* comm = NULL;
  tether_result_t r = tether_init(args->myrank, args->nranks, &id, have_host_options ? &host_options : NULL, &comm);
  have_host_options = 0;
  if (r != TETHER_SUCCESS) return fail_tether(r, "init");

  int mype_node = 0, npes_node = 0;
  if ((rc = node_ranks(comm, &mype_node, &npes_node))) {
    tether_finalize(comm);
    return rc;
  }
  handle->version = TETHER_NVSHMEM_ABI_VERSION;
  handle->pg_rank = args->myrank;
  handle->pg_size = args->nranks;
  handle->mype_node = mype_node;
  handle->npes_node = npes_node;
  handle->allgather = op_allgather;
  handle->alltoall = op_alltoall;
  handle->barrier = op_barrier;
  handle->global_exit = op_global_exit;
  handle->finalize = op_finalize;
  handle->show_info = op_show_info;
  handle->comm_state = comm;
  current_comm = comm;
  return 0;
}

/* ---- tether's extensions ---- */

EXPORT int tether_nvshmem_set_options(const tether_options_t* options) {
  have_host_options = 0;
  if (!options) return 0;
  if (options->struct_size == 0)
    return fail(TETHER_ERR_INVALID_ARGUMENT, "set_options: struct_size is 0 (initialise with tether_options_init)");
  tether_options_init(&host_options);
  memcpy(&host_options, options,
         options->struct_size < sizeof host_options ? options->struct_size : sizeof host_options);
  host_options.struct_size = sizeof host_options;
  have_host_options = 1;
  return 0;
}

EXPORT const char* tether_nvshmem_last_error(void) { return last_error; }

/* capi_ranks.h — rank bodies written in C11 against tether.h, called by the
 * C++ harness (test_capi.cpp) on forked ranks. Each returns 0, or non-zero with
 * what went wrong in `err`. */
#ifndef TETHER_TEST_CAPI_RANKS_H
#define TETHER_TEST_CAPI_RANKS_H

#include <stddef.h>

#include "tether/tether.h"

#ifdef __cplusplus
extern "C" {
#endif

int capi_collectives(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen);
int capi_split(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen);
int capi_from_env(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen);
int capi_bad_arguments(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen);
int capi_timeout(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen);
int capi_abort(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen);
/* Nonblocking calls and the UCC OOB trio (capi_nonblocking.c). */
int capi_nonblocking(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen);
/* Init timings and counters (capi_observe.c). */
int capi_observe(int rank, int nranks, const tether_unique_id_t* id, char* err, size_t errlen);
/* No peers: ids, versions, results, NULL handles, a bad rank. */
int capi_local(char* err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif

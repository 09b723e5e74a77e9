/* capi_check.h — the C tests' expectation macros. A failed expectation writes
 * "file:line: what (last error: ...)" into `err` and returns 1 from the body. */
#ifndef TETHER_TEST_CAPI_CHECK_H
#define TETHER_TEST_CAPI_CHECK_H

#include <stdio.h>
#include <string.h>

#include "tether/tether.h"

#define EXPECT(cond, ...)                                                                                  \
  do {                                                                                                     \
    if (!(cond)) {                                                                                         \
      int used_ = snprintf(err, errlen, "%s:%d: ", __FILE__, __LINE__);                                    \
      if (used_ > 0 && (size_t)used_ < errlen) snprintf(err + used_, errlen - (size_t)used_, __VA_ARGS__); \
      return 1;                                                                                            \
    }                                                                                                      \
  } while (0)

/* A call that must succeed. */
#define OK(call)                                                                                              \
  do {                                                                                                        \
    tether_result_t r_ = (call);                                                                              \
    EXPECT(r_ == TETHER_SUCCESS, "%s returned %s: %s", #call, tether_result_string(r_), tether_last_error()); \
  } while (0)

/* A call that must fail with `code` and a last error containing `text`. */
#define FAILS(call, code, text)                                                                             \
  do {                                                                                                      \
    tether_result_t r_ = (call);                                                                            \
    EXPECT(r_ == (code), "%s returned %s, expected %s (last error: %s)", #call, tether_result_string(r_),   \
           tether_result_string(code), tether_last_error());                                                \
    EXPECT(strstr(tether_last_error(), (text)) != NULL, "%s: last error '%s' does not mention '%s'", #call, \
           tether_last_error(), (text));                                                                    \
  } while (0)

#endif

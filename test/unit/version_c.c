/* tether/version.h is plain C: this file is compiled as C99 with -Wpedantic
 * -Werror and checks the macros against the project version Meson passes in. */
#include <stdio.h>
#include <string.h>

#include <tether/version.h>

#if TETHER_VERSION < TETHER_VERSION_CHECK(0, 0, 1)
#error "TETHER_VERSION is not a number above 0.0.0"
#endif

int main(void) {
  char built[64];
  snprintf(built, sizeof built, "%d.%d.%d", TETHER_VERSION_MAJOR, TETHER_VERSION_MINOR, TETHER_VERSION_PATCH);
  if (strcmp(built, TETHER_VERSION_STRING) != 0 || strcmp(TETHER_VERSION_STRING, EXPECTED_VERSION) != 0) {
    fprintf(stderr, "version.h says %s / %s, the project is %s\n", built, TETHER_VERSION_STRING, EXPECTED_VERSION);
    return 1;
  }
  printf("tether/version.h from C: %s\n", TETHER_VERSION_STRING);
  return 0;
}

// Uses tether the way an embedding runtime does: public headers only.
#include <tether/tether.hpp>

#include <cstdio>
#include <cstring>

int main() {
  tether::TcpBootstrap boot(0, 1, tether::TcpBootstrap::createUniqueId("127.0.0.1:0"));
  int value = 42;
  boot.allgather(&value, sizeof value);
  std::printf("parent: tether %s (%d.%d.%d), rank %d of %d, value %d\n", TETHER_VERSION_STRING, TETHER_VERSION_MAJOR,
              TETHER_VERSION_MINOR, TETHER_VERSION_PATCH, boot.rank(), boot.size(), value);
  return std::strlen(TETHER_VERSION_STRING) > 0 && value == 42 ? 0 : 1;
}

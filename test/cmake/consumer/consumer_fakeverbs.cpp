// Links tether::fakeverbs (libtether-fakeverbs): a simulated RoCE device.
#include <tether/rdma/fake_verbs.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main() {
  tether::rdma::FakeVerbs verbs(tether::rdma::FakeFabric::roce());
  std::vector<std::string> names;
  if (verbs.listDevices(names) != 0 || names.empty()) {
    std::fprintf(stderr, "consumer_fakeverbs: no fake device\n");
    return 1;
  }
  std::printf("consumer_fakeverbs: %s device %s\n", verbs.backendName(), names.front().c_str());
  return 0;
}

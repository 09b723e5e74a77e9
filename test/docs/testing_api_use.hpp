#include <tether/testing/in_process.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

// The code under test: a runtime's setup, written against tether::Bootstrap
// (a TcpBootstrap in production).
class MyRuntime {
 public:
  explicit MyRuntime(tether::Bootstrap& bootstrap) : boot_(bootstrap) {}
  // Every rank learns every rank's endpoint (here a number made from its rank).
  void connectAll() {
    endpoints_.assign(boot_.size(), 0);
    endpoints_[boot_.rank()] = 1000 + boot_.rank();
    boot_.allgather(endpoints_.data(), sizeof(std::uint32_t));
  }
  std::uint32_t endpoint(int rank) const { return endpoints_[rank]; }

 private:
  tether::Bootstrap& boot_;
  std::vector<std::uint32_t> endpoints_;
};

inline void testConnectAll() {
  tether::testing::InProcessWorld world(/*nranks=*/4, /*nranksPerNode=*/2);
  world.run([](tether::Bootstrap& bootstrap) {   // one thread per rank
    MyRuntime runtime(bootstrap);                  // the code under test
    runtime.connectAll();
    for (int r = 0; r < bootstrap.size(); ++r)
      if (runtime.endpoint(r) != 1000u + r) throw std::runtime_error("wrong endpoint");
  });                                              // joins; rethrows the first failure
}

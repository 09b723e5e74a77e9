#include <tether/tether.hpp>

#include <cstdint>
#include <string>
#include <vector>

// What each rank publishes, e.g. its RDMA queue pair's number and LID.
struct QpInfo {
  std::uint32_t qpn;
  std::uint16_t lid;
};

// One process makes the id and hands its text to all ranks (env var, file, your launcher) ...
inline std::string makeId() { return tether::TcpBootstrap::createUniqueId().toString(); }

// ... each rank joins and learns every rank's record: all[r] is rank r's.
inline std::vector<QpInfo> exchange(int rank, int nranks, const std::string& text, QpInfo mine) {
  tether::TcpBootstrap boot(rank, nranks, tether::UniqueId::fromString(text));
  std::vector<QpInfo> all(nranks);
  all[rank] = mine;
  boot.allgather(all.data(), sizeof(QpInfo));
  return all;
}

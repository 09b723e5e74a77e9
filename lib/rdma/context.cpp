// Context: opening the device port, choosing the GID, PD and CQ; completions.
#include "tether/rdma/context.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "base/join.hpp"
#include "tether/error.hpp"

namespace tether::rdma {
namespace {

const char* portStateName(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_DOWN:
      return "DOWN";
    case IBV_PORT_INIT:
      return "INIT";
    case IBV_PORT_ARMED:
      return "ARMED";
    case IBV_PORT_ACTIVE:
      return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
      return "ACTIVE_DEFER";
    default:
      return "NOP";
  }
}

std::string errnoText(int error) { return fmt::format("{} (errno {})", std::strerror(error), error); }

}  // namespace

Context::Context(Verbs& verbs, const Config& config, int rank, int expectedQps)
    : verbs_(verbs), config_(config), rank_(rank) {
  try {
    openDevice();
    ibv_device_attr deviceAttr{};
    if (const int rc = verbs_.queryDevice(context_, &deviceAttr); rc != 0)
      throw Error(ErrorCode::System,
                  fmt::format("rank {}: rdma: ibv_query_device on {} failed: {}", rank_, where(), errnoText(rc)),
                  rank_);
    maxRdAtomic_ = std::min<int>(config_.rdAtomic, deviceAttr.max_qp_init_rd_atom);
    maxDestRdAtomic_ = std::min<int>(config_.rdAtomic, deviceAttr.max_qp_rd_atom);

    const auto entries = readGidTable(verbs_, context_, port_, portAttr_, where());
    gid_ = chooseGid(entries, portAttr_.link_layer, config_.addressFamily, config_.gidIndex, where());

    pd_ = verbs_.allocPd(context_);
    if (pd_ == nullptr)
      throw Error(ErrorCode::System,
                  fmt::format("rank {}: rdma: ibv_alloc_pd on {} failed: {}", rank_, where(), errnoText(errno)), rank_);
    int cqe = std::max(16, std::max(1, expectedQps) * config_.queueDepth);
    if (deviceAttr.max_cqe > 0) cqe = std::min(cqe, deviceAttr.max_cqe);
    cq_ = verbs_.createCq(context_, cqe);
    if (cq_ == nullptr)
      throw Error(ErrorCode::System,
                  fmt::format("rank {}: rdma: ibv_create_cq({} entries) on {} failed: {}", rank_, cqe, where(),
                              errnoText(errno)),
                  rank_);
  } catch (...) {
    if (cq_ != nullptr) verbs_.destroyCq(cq_);
    if (pd_ != nullptr) verbs_.deallocPd(pd_);
    if (context_ != nullptr) verbs_.closeDevice(context_);
    throw;
  }
}

Context::~Context() {
  // Teardown errors cannot be reported from a destructor; the objects are gone either way.
  verbs_.destroyCq(cq_);
  verbs_.deallocPd(pd_);
  verbs_.closeDevice(context_);
}

bool Context::needsGrh() const {
  return portAttr_.link_layer == IBV_LINK_LAYER_ETHERNET || (portAttr_.flags & IBV_QPF_GRH_REQUIRED) != 0;
}

std::string Context::where() const { return fmt::format("{}:{} ({})", deviceName_, port_, verbs_.backendName()); }

void Context::openDevice() {
  std::vector<std::string> names;
  if (const int rc = verbs_.listDevices(names); rc != 0)
    throw Error(ErrorCode::System,
                fmt::format("rank {}: rdma: no RDMA devices ({} ibv_get_device_list: {})", rank_, verbs_.backendName(),
                            errnoText(rc)),
                rank_);
  if (names.empty())
    throw Error(ErrorCode::System,
                fmt::format("rank {}: rdma: no RDMA devices ({} ibv_get_device_list "
                            "found none)",
                            rank_, verbs_.backendName()),
                rank_);
  if (!config_.hca.empty() && std::find(names.begin(), names.end(), config_.hca) == names.end())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("rank {}: rdma: TETHER_IB_HCA names device \"{}\" which is not present "
                            "(present: {})",
                            rank_, config_.hca, joined(names, ", ")),
                rank_);
  std::vector<std::string> tried;
  for (const auto& name : names) {
    if (!config_.hca.empty() && name != config_.hca) continue;
    ibv_context* context = verbs_.openDevice(name);
    if (context == nullptr) {
      tried.push_back(fmt::format("{}: ibv_open_device: {}", name, errnoText(errno)));
      continue;
    }
    try {
      choosePort(context, name);
    } catch (...) {
      verbs_.closeDevice(context);
      throw;
    }
    if (port_ != 0) {
      context_ = context;
      deviceName_ = name;
      return;
    }
    tried.push_back(fmt::format("{}: no active port", name));
    verbs_.closeDevice(context);
  }
  throw Error(ErrorCode::System, fmt::format("rank {}: rdma: no usable device port ({})", rank_, joined(tried, "; ")),
              rank_);
}

// Sets port_ and portAttr_ to the wanted (or first) active port; leaves port_ 0 if none.
void Context::choosePort(ibv_context* context, const std::string& name) {
  ibv_device_attr deviceAttr{};
  if (const int rc = verbs_.queryDevice(context, &deviceAttr); rc != 0)
    throw Error(ErrorCode::System,
                fmt::format("rank {}: rdma: ibv_query_device on {} failed: {}", rank_, name, errnoText(rc)), rank_);
  for (int p = 1; p <= deviceAttr.phys_port_cnt; ++p) {
    if (config_.hcaPort != 0 && p != config_.hcaPort) continue;
    ibv_port_attr attr{};
    if (const int rc = verbs_.queryPort(context, static_cast<std::uint8_t>(p), &attr); rc != 0)
      throw Error(ErrorCode::System,
                  fmt::format("rank {}: rdma: ibv_query_port({}:{}) failed: {}", rank_, name, p, errnoText(rc)), rank_);
    if (attr.state == IBV_PORT_ACTIVE) {
      port_ = static_cast<std::uint8_t>(p);
      portAttr_ = attr;
      return;
    }
    if (config_.hcaPort != 0)
      throw Error(ErrorCode::System,
                  fmt::format("rank {}: rdma: TETHER_IB_HCA port {}:{} is {}, not ACTIVE", rank_, name, p,
                              portStateName(attr.state)),
                  rank_);
  }
  if (config_.hcaPort > deviceAttr.phys_port_cnt)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("rank {}: rdma: TETHER_IB_HCA port {} but {} has {} port(s)", rank_, config_.hcaPort, name,
                            deviceAttr.phys_port_cnt),
                rank_);
}

void Context::waitCompletions(int count, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(20);
  int done = 0;
  ibv_wc wcs[16];
  while (done < count) {
    const int n = verbs_.pollCq(cq_, std::min(16, count - done), wcs);
    if (n < 0)
      throw Error(ErrorCode::System, fmt::format("rank {}: rdma: ibv_poll_cq on {} failed ({})", rank_, where(), n),
                  rank_);
    for (int i = 0; i < n; ++i) {
      if (wcs[i].status != IBV_WC_SUCCESS) {
        const int peer = static_cast<int>(wcs[i].wr_id);
        throw Error(ErrorCode::System,
                    fmt::format("rank {}: rdma: work request to peer {} on QP {:#x} failed: {} "
                                "(status {}, vendor_err {:#x})",
                                rank_, peer, wcs[i].qp_num, ibv_wc_status_str(wcs[i].status),
                                static_cast<int>(wcs[i].status), wcs[i].vendor_err),
                    rank_, peer);
      }
    }
    done += n;
    if (n > 0 || done == count) continue;
    if (std::chrono::steady_clock::now() >= deadline)
      throw Error(ErrorCode::Timeout,
                  fmt::format("rank {}: rdma: {} of {} completions after {} ms on {}", rank_, done, count,
                              timeout.count(), where()),
                  rank_);
    // Back off to at most 1 ms between polls: completions of a setup phase are not latency critical.
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
}

}  // namespace tether::rdma

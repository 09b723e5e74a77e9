// C ABI: communicators — init, finalize and every operation of tether::Bootstrap.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "capi/guard.hpp"
#include "tether/tcp_bootstrap.hpp"
#include "tether/tether.h"

struct tether_comm {
  std::shared_ptr<tether::Bootstrap> boot;
};

namespace {

using namespace tether::capi;

// A field of the caller's tether_options_t is read only if its struct_size covers it.
#define TETHER_HAS_FIELD(options, field) \
  ((options)->struct_size >= offsetof(tether_options_t, field) + sizeof((options)->field))

tether::TcpOptions toOptions(const tether_options_t* in, const char* function) {
  tether::TcpOptions out;
  if (!in) return out;
  if (in->struct_size == 0)
    invalid(std::string(function) + ": options->struct_size is 0 (initialise options with tether_options_init)");
  if (TETHER_HAS_FIELD(in, timeout_ms)) {
    if (in->timeout_ms < 0)
      invalid(std::string(function) + ": options->timeout_ms " + std::to_string(in->timeout_ms) + " is negative");
    out.timeout = std::chrono::milliseconds(in->timeout_ms);
  }
  if (TETHER_HAS_FIELD(in, listen_host) && in->listen_host) out.listenHost = in->listen_host;
  if (TETHER_HAS_FIELD(in, advertise) && in->advertise) out.advertise = in->advertise;
  if (TETHER_HAS_FIELD(in, advertise_context) && in->advertise_for) {
    auto fn = in->advertise_for;
    void* context = in->advertise_context;
    out.advertiseFor = [fn, context](const std::string& listen) {
      const char* chosen = fn(listen.c_str(), context);
      return chosen ? std::string(chosen) : std::string();
    };
  }
  return out;
}

#undef TETHER_HAS_FIELD

tether::Bootstrap& boot(const tether_comm_t* comm, const char* function) {
  return *require(comm, function, "comm")->boot;
}

// "rank R: function: what is NULL" for the arrays tether would dereference.
template <class T>
void requireArray(const tether_comm_t* comm, T* p, const char* function, const char* what) {
  if (!p) invalid("rank " + std::to_string(comm->boot->rank()) + ": " + function + ": " + what + " is NULL");
}

tether_comm_t* wrap(std::shared_ptr<tether::Bootstrap> b) { return new tether_comm{std::move(b)}; }

// One int fact of a communicator into *out.
template <class Get>
tether_result_t intFact(const tether_comm_t* comm, int* out, const char* function, const char* name, Get get) {
  return guarded(function, [&] { *require(out, function, name) = get(boot(comm, function)); });
}

// A string fact of a communicator into buf[0..len), NUL-terminated.
template <class Get>
tether_result_t stringFact(const tether_comm_t* comm, char* buf, size_t len, const char* function, Get get) {
  return guarded(function, [&] {
    std::string text = get(boot(comm, function));
    require(buf, function, "buf");
    if (text.size() + 1 > len)
      invalid(std::string(function) + ": " + std::to_string(text.size() + 1) + " bytes needed, buffer has " +
              std::to_string(len));
    std::memcpy(buf, text.c_str(), text.size() + 1);
  });
}

// Every handle holds a TcpBootstrap (tether_init, tether_split).
const tether::TcpBootstrap& tcp(const tether_comm_t* comm, const char* function) {
  return dynamic_cast<const tether::TcpBootstrap&>(boot(comm, function));
}

// Copies the part of `full` that the caller's struct (its struct_size) covers.
template <class T>
void fillSized(T* out, T full, const char* function, const char* what) {
  require(out, function, what);
  if (out->struct_size == 0)
    invalid(std::string(function) + ": " + what + "->struct_size is 0 (set it to sizeof the struct)");
  full.struct_size = out->struct_size;
  std::memcpy(out, &full, std::min(out->struct_size, sizeof full));
}

std::int64_t phaseUs(const std::optional<std::chrono::microseconds>& at) {
  return at ? static_cast<std::int64_t>(at->count()) : TETHER_PHASE_ABSENT;
}

}  // namespace

extern "C" {

void tether_options_init(tether_options_t* options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
}

tether_result_t tether_init(int rank, int nranks, const tether_unique_id_t* id, const tether_options_t* options,
                            tether_comm_t** comm) {
  if (comm) *comm = nullptr;
  return guarded("tether_init", [&] {
    require(comm, "tether_init", "comm");
    require(id, "tether_init", "id");
    auto opts = toOptions(options, "tether_init");
    tether::UniqueId uid;
    std::memcpy(uid.bytes.data(), id->bytes, uid.bytes.size());
    auto b = std::make_shared<tether::TcpBootstrap>(rank, nranks, uid, opts);
    *comm = wrap(std::move(b));
  });
}

tether_result_t tether_init_from_env(const tether_options_t* options, tether_comm_t** comm) {
  if (comm) *comm = nullptr;
  return guarded("tether_init_from_env", [&] {
    require(comm, "tether_init_from_env", "comm");
    std::shared_ptr<tether::Bootstrap> b =
        tether::TcpBootstrap::fromEnvironment(toOptions(options, "tether_init_from_env"));
    *comm = wrap(std::move(b));
  });
}

tether_result_t tether_finalize(tether_comm_t* comm) {
  return guarded("tether_finalize", [&] { delete comm; });
}

tether_result_t tether_comm_rank(const tether_comm_t* comm, int* rank) {
  return guarded("tether_comm_rank",
                 [&] { *require(rank, "tether_comm_rank", "rank") = boot(comm, "tether_comm_rank").rank(); });
}

tether_result_t tether_comm_size(const tether_comm_t* comm, int* size) {
  return guarded("tether_comm_size",
                 [&] { *require(size, "tether_comm_size", "size") = boot(comm, "tether_comm_size").size(); });
}

tether_result_t tether_comm_nranks_per_node(const tether_comm_t* comm, int* nranks_per_node) {
  return guarded("tether_comm_nranks_per_node", [&] {
    *require(nranks_per_node, "tether_comm_nranks_per_node", "nranks_per_node") =
        boot(comm, "tether_comm_nranks_per_node").nranksPerNode();
  });
}

tether_result_t tether_comm_world_rank(const tether_comm_t* comm, int* world_rank) {
  return intFact(comm, world_rank, "tether_comm_world_rank", "world_rank",
                 [](const tether::Bootstrap& b) { return b.worldRank(); });
}

tether_result_t tether_comm_local_rank(const tether_comm_t* comm, int* local_rank) {
  return intFact(comm, local_rank, "tether_comm_local_rank", "local_rank",
                 [](const tether::Bootstrap& b) { return b.localRank(); });
}

tether_result_t tether_comm_node_id(const tether_comm_t* comm, int* node_id) {
  return intFact(comm, node_id, "tether_comm_node_id", "node_id",
                 [](const tether::Bootstrap& b) { return b.nodeId(); });
}

tether_result_t tether_comm_nnodes(const tether_comm_t* comm, int* nnodes) {
  return intFact(comm, nnodes, "tether_comm_nnodes", "nnodes", [](const tether::Bootstrap& b) { return b.nnodes(); });
}

tether_result_t tether_comm_peer_host(const tether_comm_t* comm, int peer, char* buf, size_t len) {
  return stringFact(comm, buf, len, "tether_comm_peer_host",
                    [peer](const tether::Bootstrap& b) { return b.peerHost(peer); });
}

tether_result_t tether_comm_peer_address(const tether_comm_t* comm, int peer, char* buf, size_t len) {
  return stringFact(comm, buf, len, "tether_comm_peer_address",
                    [peer](const tether::Bootstrap& b) { return b.peerAddress(peer); });
}

tether_result_t tether_send(tether_comm_t* comm, const void* data, size_t bytes, int peer, int tag) {
  return guarded("tether_send", [&] { boot(comm, "tether_send").send(data, bytes, peer, tag); });
}

tether_result_t tether_recv(tether_comm_t* comm, void* data, size_t bytes, int peer, int tag) {
  return guarded("tether_recv", [&] { boot(comm, "tether_recv").recv(data, bytes, peer, tag); });
}

tether_result_t tether_allgather(tether_comm_t* comm, void* all_data, size_t bytes_per_rank) {
  return guarded("tether_allgather", [&] { boot(comm, "tether_allgather").allgather(all_data, bytes_per_rank); });
}

tether_result_t tether_alltoall(tether_comm_t* comm, const void* send_data, void* recv_data, size_t bytes_per_rank) {
  return guarded("tether_alltoall",
                 [&] { boot(comm, "tether_alltoall").alltoall(send_data, recv_data, bytes_per_rank); });
}

tether_result_t tether_alltoallv(tether_comm_t* comm, const void* send_data, const size_t* send_counts,
                                 const size_t* send_displs, void* recv_data, const size_t* recv_counts,
                                 const size_t* recv_displs) {
  return guarded("tether_alltoallv", [&] {
    auto& b = boot(comm, "tether_alltoallv");
    requireArray(comm, send_counts, "tether_alltoallv", "send_counts");
    requireArray(comm, send_displs, "tether_alltoallv", "send_displs");
    requireArray(comm, recv_counts, "tether_alltoallv", "recv_counts");
    requireArray(comm, recv_displs, "tether_alltoallv", "recv_displs");
    b.alltoallv(send_data, send_counts, send_displs, recv_data, recv_counts, recv_displs);
  });
}

tether_result_t tether_broadcast(tether_comm_t* comm, void* data, size_t bytes, int root) {
  return guarded("tether_broadcast", [&] { boot(comm, "tether_broadcast").broadcast(data, bytes, root); });
}

tether_result_t tether_barrier(tether_comm_t* comm) {
  return guarded("tether_barrier", [&] { boot(comm, "tether_barrier").barrier(); });
}

tether_result_t tether_barrier_subset(tether_comm_t* comm, const int* ranks, size_t count) {
  return guarded("tether_barrier_subset", [&] {
    auto& b = boot(comm, "tether_barrier_subset");
    if (count) requireArray(comm, ranks, "tether_barrier_subset", "ranks");
    b.barrier(std::vector<int>(ranks, ranks + count));
  });
}

tether_result_t tether_split(tether_comm_t* comm, int color, int key, tether_comm_t** child) {
  if (child) *child = nullptr;
  return guarded("tether_split", [&] {
    auto& b = boot(comm, "tether_split");
    requireArray(comm, child, "tether_split", "child");
    auto c = b.split(color, key);
    if (c) *child = wrap(std::move(c));
  });
}

tether_result_t tether_split_by_node(tether_comm_t* comm, tether_comm_t** child) {
  if (child) *child = nullptr;
  return guarded("tether_split_by_node", [&] {
    auto& b = boot(comm, "tether_split_by_node");
    requireArray(comm, child, "tether_split_by_node", "child");
    *child = wrap(b.splitByNode());
  });
}

tether_result_t tether_abort(tether_comm_t* comm, const char* reason) {
  return guarded("tether_abort", [&] { boot(comm, "tether_abort").abort(reason ? reason : "tether_abort"); });
}

tether_result_t tether_set_timeout(tether_comm_t* comm, int64_t timeout_ms) {
  return guarded("tether_set_timeout", [&] {
    auto& b = boot(comm, "tether_set_timeout");
    if (timeout_ms < 0)
      invalid("rank " + std::to_string(b.rank()) + ": tether_set_timeout: timeout_ms " + std::to_string(timeout_ms) +
              " is negative (0 means the default: TETHER_TIMEOUT_MS, else 300000)");
    b.setTimeout(std::chrono::milliseconds(timeout_ms));
  });
}

tether_result_t tether_get_timeout(const tether_comm_t* comm, int64_t* timeout_ms) {
  return guarded("tether_get_timeout", [&] {
    *require(timeout_ms, "tether_get_timeout", "timeout_ms") = boot(comm, "tether_get_timeout").timeout().count();
  });
}

tether_result_t tether_comm_init_timings(const tether_comm_t* comm, tether_init_timings_t* timings) {
  return guarded("tether_comm_init_timings", [&] {
    const tether::InitTimings t = tcp(comm, "tether_comm_init_timings").initTimings();
    tether_init_timings_t full{};
    full.started_unix_us =
        std::chrono::duration_cast<std::chrono::microseconds>(t.started.time_since_epoch()).count();
    full.listen_us = phaseUs(t.listen);
    full.host_local_us = phaseUs(t.hostLocal);
    full.registered_us = phaseUs(t.registered);
    full.table_received_us = phaseUs(t.tableReceived);
    full.first_link_us = phaseUs(t.firstLink);
    full.total_us = phaseUs(t.total);
    fillSized(timings, full, "tether_comm_init_timings", "timings");
  });
}

tether_result_t tether_comm_counters(const tether_comm_t* comm, tether_counters_t* counters) {
  return guarded("tether_comm_counters", [&] {
    const tether::Counters c = tcp(comm, "tether_comm_counters").counters();
    tether_counters_t full{};
    full.allgather = c.allgather;
    full.alltoall = c.alltoall;
    full.alltoallv = c.alltoallv;
    full.broadcast = c.broadcast;
    full.barrier = c.barrier;
    full.barrier_subset = c.subsetBarrier;
    full.split = c.split;
    full.send = c.send;
    full.recv = c.recv;
    full.frames_sent = c.framesSent;
    full.bytes_sent = c.bytesSent;
    full.frames_received = c.framesReceived;
    full.bytes_received = c.bytesReceived;
    full.timeouts = c.timeouts;
    full.aborts = c.aborts;
    full.dials = c.dials;
    full.redials = c.redials;
    full.budget_closes = c.budgetCloses;
    fillSized(counters, full, "tether_comm_counters", "counters");
  });
}

}  // extern "C"

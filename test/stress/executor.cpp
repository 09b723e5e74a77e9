#include "executor.hpp"

#include <algorithm>
#include <exception>
#include <thread>

namespace tether::stress {

void RankTally::check(const void* block, std::size_t size, const OpKey& expected, const char* where) {
  blocks++;
  bytes += size;
  if (auto problem = checkPayload(block, size, expected)) {
    mismatches++;
    std::lock_guard<std::mutex> lock(mutex);
    if (firstMismatches.size() < 8) firstMismatches.push_back(std::string(where) + ": " + *problem);
  }
}

namespace {

constexpr int kAll = -1;  // destination of a block meant for every rank

struct Context {
  Bootstrap& comm;
  std::uint32_t commId;
  std::uint64_t seed;
  RankTally& tally;
  int rank() const { return comm.rank(); }
  int size() const { return comm.size(); }
  OpKey key(const Op& op, int source, int destination, std::uint32_t step = 0, std::uint32_t seq = 0) const {
    return OpKey{commId, op.index, op.kind, step, source, destination, seq};
  }
};

void allgather(Context& c, const Op& op) {
  std::vector<unsigned char> data(static_cast<std::size_t>(c.size()) * op.bytes);
  fillPayload(data.data() + c.rank() * op.bytes, op.bytes, c.key(op, c.rank(), kAll));
  c.comm.allgather(data.data(), op.bytes);
  for (int j = 0; j < c.size(); ++j)
    c.tally.check(data.data() + j * op.bytes, op.bytes, c.key(op, j, kAll), "allgather");
}

void alltoall(Context& c, const Op& op) {
  const std::size_t n = static_cast<std::size_t>(c.size());
  std::vector<unsigned char> out(n * op.bytes), in(n * op.bytes);
  for (std::size_t j = 0; j < n; ++j) fillPayload(out.data() + j * op.bytes, op.bytes, c.key(op, c.rank(), int(j)));
  c.comm.alltoall(out.data(), in.data(), op.bytes);
  for (std::size_t j = 0; j < n; ++j)
    c.tally.check(in.data() + j * op.bytes, op.bytes, c.key(op, int(j), c.rank()), "alltoall");
}

void alltoallv(Context& c, const Op& op) {
  const int n = c.size();
  std::vector<std::size_t> sendCounts(n), sendDispls(n), recvCounts(n), recvDispls(n);
  std::size_t sendTotal = 0, recvTotal = 0;
  for (int j = 0; j < n; ++j) {
    sendCounts[j] = alltoallvBytes(c.seed, c.commId, op.index, c.rank(), j);
    recvCounts[j] = alltoallvBytes(c.seed, c.commId, op.index, j, c.rank());
    sendDispls[j] = sendTotal;
    recvDispls[j] = recvTotal;
    sendTotal += sendCounts[j];
    recvTotal += recvCounts[j] + 8;  // gaps between blocks: displacements are honoured
  }
  std::vector<unsigned char> out(sendTotal + 1), in(recvTotal + 1);
  for (int j = 0; j < n; ++j) {
    if (sendCounts[j]) fillPayload(out.data() + sendDispls[j], sendCounts[j], c.key(op, c.rank(), j));
  }
  c.comm.alltoallv(out.data(), sendCounts.data(), sendDispls.data(), in.data(), recvCounts.data(), recvDispls.data());
  for (int j = 0; j < n; ++j) {
    if (recvCounts[j]) c.tally.check(in.data() + recvDispls[j], recvCounts[j], c.key(op, j, c.rank()), "alltoallv");
  }
}

void broadcast(Context& c, const Op& op) {
  std::vector<unsigned char> data(op.bytes);
  if (c.rank() == op.root) fillPayload(data.data(), data.size(), c.key(op, op.root, kAll));
  c.comm.broadcast(data.data(), data.size(), op.root);
  c.tally.check(data.data(), data.size(), c.key(op, op.root, kAll), "broadcast");
}

void barrier(Context& c, const Op& op) {
  if (op.subset.empty()) {
    c.comm.barrier();
  } else if (std::find(op.subset.begin(), op.subset.end(), c.rank()) != op.subset.end()) {
    c.comm.barrier(op.subset);
  }
}

// Several threads at once, each on its own tag; each sends all its messages
// (send does not wait for the receiver) and then receives as many, in order.
void sendRecv(Context& c, const Op& op) {
  if (op.shift == 0) return;
  const int to = (c.rank() + op.shift) % c.size();
  const int from = (c.rank() - op.shift + c.size()) % c.size();
  std::vector<std::exception_ptr> errors(op.threads);
  std::vector<std::thread> threads;
  for (int t = 0; t < op.threads; ++t) {
    threads.emplace_back([&, t] {
      try {
        const int tag = op.tagBase + t;
        for (int m = 0; m < op.messages; ++m) {
          std::vector<unsigned char> msg(p2pBytes(c.seed, c.commId, op.index, t, m, c.rank()));
          fillPayload(msg.data(), msg.size(), c.key(op, c.rank(), to, t, m));
          c.comm.send(msg.data(), msg.size(), to, tag);
        }
        for (int m = 0; m < op.messages; ++m) {
          std::vector<unsigned char> msg(p2pBytes(c.seed, c.commId, op.index, t, m, from));
          c.comm.recv(msg.data(), msg.size(), from, tag);
          c.tally.check(msg.data(), msg.size(), c.key(op, from, c.rank(), t, m), "send/recv");
        }
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace

void runProgram(Bootstrap& comm, std::uint32_t commId, std::uint64_t seed, const std::vector<Op>& program,
                RankTally& tally) {
  Context c{comm, commId, seed, tally};
  for (const auto& op : program) {
    switch (op.kind) {
      case OpKind::Allgather:
        allgather(c, op);
        break;
      case OpKind::Alltoall:
        alltoall(c, op);
        break;
      case OpKind::Alltoallv:
        alltoallv(c, op);
        break;
      case OpKind::Broadcast:
        broadcast(c, op);
        break;
      case OpKind::Barrier:
        barrier(c, op);
        break;
      case OpKind::SendRecv:
        sendRecv(c, op);
        break;
    }
    tally.ops++;
  }
}

}  // namespace tether::stress

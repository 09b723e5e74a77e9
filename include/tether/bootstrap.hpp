// tether/bootstrap.hpp — the abstract bootstrap contract.
//
// Header-only and usable from C++17. A communication runtime programs against
// this interface; tether::TcpBootstrap implements it over one long-lived TCP
// stream per peer, tether::testing::InProcessWorld implements it with threads.
//
// Contract (every implementation):
//  * Ranks are 0..size()-1. Tags are non-negative 32-bit values.
//  * Every blocking call honours the communicator's timeout (setTimeout) and
//    throws tether::Error{Timeout} when it passes; abort() from any thread ends
//    every pending and future call on this rank with tether::Error{Aborted}.
//  * Point-to-point send/recv are thread-safe and non-overtaking per (peer, tag):
//    the n-th recv posted for (peer, tag) gets the n-th send made to us with that
//    tag. send() returns once the payload has been handed to the transport, so
//    the caller's buffer may be reused; it does not wait for the matching recv.
//  * Collectives must be called in the same order on every rank of the
//    communicator, one at a time per communicator: a collective called while
//    another thread's collective call on the same communicator is in progress
//    fails at once with Error{InvalidArgument} (use one communicator per
//    thread, from split()). The threading contract: docs/design.md, "Threads". Each call gets the next
//    collective id; a peer that calls a different collective, or one with a
//    different size, produces tether::Error{Protocol} naming both operations —
//    never a silently wrong payload.
//  * A failed collective leaves the communicator unusable for further
//    collectives (the ranks no longer agree on where they are), from the
//    moment it fails: a nonblocking one too, though nobody waits for its
//    request or tests it.
//  * Caller mistakes are Error{InvalidArgument} before a byte is sent or a
//    collective id is taken: bad ranks, tags and roots, null buffers, and
//    sizes no buffer can have — a total (bytesPerRank x size(), a
//    displacement + count) that overflows size_t, or a buffer that runs past
//    the end of the address space.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tether/error.hpp"
#include "tether/detail/defaults.hpp"
#include "tether/request.hpp"

namespace tether {

// kDefaultTimeout (tether/detail/defaults.hpp): the deadline of construction
// and of each blocking call when none is given.

class Bootstrap {
 public:
  // Pass as color to split() to get no child communicator (nullptr).
  static constexpr int kNoColor = -1;

  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This process's rank in the world communicator (rank() on the world itself).
  virtual int worldRank() const = 0;

  // Topology, as the rendezvous learned it; no communication. A node is a
  // host: ranks with the same host id, from TETHER_HOST_ID or else the host
  // name and boot id (docs/design.md, "Host identity"). Nodes of a
  // communicator are numbered 0..nnodes()-1 in the order of their lowest
  // communicator rank.
  // Number of ranks of this communicator on this rank's node (this rank included).
  virtual int nranksPerNode() const = 0;
  // This rank's index among the communicator's ranks on its node, in rank order.
  virtual int localRank() const = 0;
  // This rank's node, and how many nodes the communicator spans.
  virtual int nodeId() const = 0;
  virtual int nnodes() const = 0;
  // Where `peer` (a rank of this communicator) runs: its host address
  // ("10.0.0.7") and its advertised listen address ("10.0.0.7:41235").
  virtual std::string peerHost(int peer) const = 0;
  virtual std::string peerAddress(int peer) const = 0;

  // Point-to-point. `bytes` must be equal on both sides (a mismatch is a Protocol error).
  virtual void send(const void* data, std::size_t bytes, int peer, int tag) = 0;
  virtual void recv(void* data, std::size_t bytes, int peer, int tag) = 0;

  // In place: rank r's block is at allData + r * bytesPerRank on entry; on return
  // every block holds its rank's data.
  virtual void allgather(void* allData, std::size_t bytesPerRank) = 0;
  // Block i of sendData goes to rank i; block j of recvData comes from rank j.
  // sendData == recvData works in place; partly overlapping buffers are an
  // Error{InvalidArgument}.
  virtual void alltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) = 0;
  // Counts and displacements in bytes, one entry per rank. recvCounts[j] must equal
  // what rank j sends to us (a mismatch is a Protocol error).
  virtual void alltoallv(const void* sendData, const std::size_t* sendCounts, const std::size_t* sendDispls,
                         void* recvData, const std::size_t* recvCounts, const std::size_t* recvDispls) = 0;
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Barrier over a subset: only the listed ranks call it, all with the same list
  // (any order, no duplicates, must contain the caller). It does not consume a
  // collective id of the whole communicator.
  virtual void barrier(const std::vector<int>& ranks) = 0;

  // Collective over this communicator. Ranks with the same color form a child
  // communicator ordered by (key, parent rank); color kNoColor returns nullptr.
  // The child shares this communicator's connections; it stays valid after the
  // parent object is destroyed.
  virtual std::shared_ptr<Bootstrap> split(int color, int key) = 0;
  // Collective: the ranks of each node form a child communicator, in rank
  // order (split(nodeId(), rank())).
  virtual std::shared_ptr<Bootstrap> splitByNode() { return split(nodeId(), rank()); }

  // Nonblocking calls (tether/request.hpp): the same arguments, checks,
  // matching and ordering as the blocking ones; arguments are checked (and
  // Error{InvalidArgument} thrown) before a collective id is consumed, and a
  // collective takes its id when it is started, so collectives (blocking or
  // not) are started in the same order on every rank. Several may be
  // outstanding at once (an ibarrier while an irecv waits). Buffers must stay
  // valid until the request is done; isend's buffer may be reused once it is.
  // The default implementations throw Error{InvalidArgument} (a Bootstrap
  // that has no nonblocking calls); TcpBootstrap implements them.
  virtual Request iallgather(void* allData, std::size_t bytesPerRank) {
    (void)allData, (void)bytesPerRank;
    return unsupported("iallgather");
  }
  virtual Request ialltoall(const void* sendData, void* recvData, std::size_t bytesPerRank) {
    (void)sendData, (void)recvData, (void)bytesPerRank;
    return unsupported("ialltoall");
  }
  virtual Request ibarrier() { return unsupported("ibarrier"); }
  virtual Request isend(const void* data, std::size_t bytes, int peer, int tag) {
    (void)data, (void)bytes, (void)peer, (void)tag;
    return unsupported("isend");
  }
  virtual Request irecv(void* data, std::size_t bytes, int peer, int tag) {
    (void)data, (void)bytes, (void)peer, (void)tag;
    return unsupported("irecv");
  }

  // Thread-safe. Ends every pending and future call on this rank (and, for
  // implementations with peers, tells the peers) with Error{Aborted}, naming
  // this rank and `reason` (its first 4 KiB, marked where it was cut). Not
  // async-signal-safe: a signal handler wakes a thread that calls it instead
  // (docs/faults.md, "After fork, exec and signals").
  virtual void abort(const std::string& reason) = 0;

  // Deadline applied to each blocking call of this communicator. 0 restores
  // the default (TETHER_TIMEOUT_MS when set, else kDefaultTimeout); a negative
  // value throws Error{InvalidArgument}. Children of split() inherit it.
  virtual void setTimeout(std::chrono::milliseconds timeout) = 0;
  // The deadline in effect (never 0).
  virtual std::chrono::milliseconds timeout() const = 0;

 private:
  Request unsupported(const char* op) const {
    throw Error(ErrorCode::InvalidArgument,
                "rank " + std::to_string(rank()) + ": " + op + ": this Bootstrap has no nonblocking calls", rank());
  }
};

}  // namespace tether

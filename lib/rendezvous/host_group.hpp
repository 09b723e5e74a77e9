// The ranks of one host meet over host-local streams (link/unix_stream.hpp)
// before the rendezvous, in groups of at most `groupMax` ranks: group j meets
// at the abstract socket groupSocketName(host, j); the first to bind it leads
// the group, the others register with it over the handshake's proofs
// (wire/handshake.hpp: Challenge -> Hello + proof -> Welcome + proof, or
// Reject), so a process without this job's secret is refused, never merged.
// A full group (places taken by ranks registered, welcomed or in their
// handshake) answers Full before the challenge and the rank tries the next
// group, so a leader holds at most groupMax - 1 member streams. The leader
// hands its group's registrations to its rendezvous in batches (one when it
// knows how many ranks the host runs) and fans the table out. The entry
// (host_group.cpp) picks the group and the part; the leader
// (host_group_leader.hpp) and the member (host_group_member.hpp) play it.
// docs/scale.md, "Host-local aggregation". Progress thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/layer.hpp"
#include "base/peer_address.hpp"
#include "tether/error.hpp"
#include "wire/handshake.hpp"

TETHER_LAYER(4, "rendezvous");

namespace tether::rdv {

namespace asio = boost::asio;

struct HostGroupOptions {
  int rank = 0, nranks = 1;
  wire::Secret secret{};
  std::uint64_t worldId = 0;
  std::string socket;  // "@name": the host's abstract socket (hostSocketName)
  int localRanks = 0;  // ranks on this host if known (TETHER_LOCAL_NRANKS), else 0
  int groupMax = 64;   // ranks of one group at most, itself included (TcpOptions::hostGroupMax)
  // Unknown count: a batch goes when no rank arrived for this long (short: a
  // job launched without a local size pays it once, after its last rank).
  std::chrono::milliseconds quiet{2};
  // A leader closes a connection that sent no hello within this (its place
  // in the group goes to another rank; a rank that was only slow tries again).
  std::chrono::milliseconds helloWait{5000};
};

struct HostGroupEvents {
  // This rank leads a group of its host (it bound the group's socket).
  std::function<void()> leading;
  // Leader: its group's registrations to pass on (its own first). Rank 0 is
  // never in a batch: it registers itself.
  std::function<void(std::vector<wire::Register>)> batch;
  // Member: its registration was handed to its leader.
  std::function<void()> joined;
  // Member: the table, from the leader.
  std::function<void(wire::SharedBytes)> table;
  // A known cause ends the rendezvous now (a member or the leader lost, a
  // refusal by the leader), naming the rank.
  std::function<void(ErrorCode, std::string, int peer)> failed;
  // Leader: member `rank` ended its rendezvous before the table for a cause
  // of its own (its deadline passed), which it sent before closing: not a
  // lost rank. The code, the text and the peer its message names.
  std::function<void(int rank, ErrorCode, std::string, int peer)> left;
};

// "@tether-<16 hex>": a hash of the job (secret, world id, size), this rank's
// host id (PeerAddress::hostId, docs/design.md "Host identity") and its
// network namespace: the abstract socket namespace is per network namespace,
// so ranks of one host in two namespaces meet in two groups.
std::string hostSocketName(const wire::Secret& secret, std::uint64_t worldId, int nranks, std::uint64_t hostId);
// "<host>-<group>": where group `group` of the host meets.
std::string groupSocketName(const std::string& host, int group);

class HostGroup {
 public:
  // Binds a group's socket (leader) or registers with the process that holds
  // it (member), trying the next group while they are full. `events` are
  // called on the progress thread, never after close().
  static std::shared_ptr<HostGroup> start(asio::io_context& io, HostGroupOptions options, HostGroupEvents events,
                                          const PeerAddress& self);
  virtual ~HostGroup() = default;
  virtual bool leader() const = 0;
  // Member: the leader's rank once it answered, else -1.
  virtual int leaderRank() const = 0;
  // The group this rank leads or joined (the one it is trying, before).
  virtual int group() const = 0;
  // Leader: the ranks of its group registered so far (itself first).
  virtual std::vector<int> ranks() const = 0;
  // Leader: sends the table to every member; they close once they have it.
  virtual void sendTable(wire::SharedBytes table) = 0;
  // Leader: tells every member why the rendezvous failed (the code and the
  // peer it names: a member reports the cause, not its leader), then closes.
  // Member waiting for the table: tells its leader why it leaves (Leave), then
  // closes, so the leader does not report it lost.
  virtual void abandon(ErrorCode code, const std::string& reason, int peer) = 0;
  // Closes every stream and the listener; no event after it.
  virtual void close() = 0;
  // Where it stands, for a timeout's message.
  virtual std::string describe() const = 0;
};

}  // namespace tether::rdv

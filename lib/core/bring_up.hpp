// Bring-up: the listener a rank opens before the rendezvous (the root's at
// the UniqueId's address), the address it advertises, hosting the rendezvous
// on the world's links (RendezvousHost), and the world's nodes learnt from the
// rendezvous table.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "base/layer.hpp"
#include "base/peer_address.hpp"
#include "core/link_table.hpp"
#include "link/connector.hpp"
#include "link/tcp_stream.hpp"
#include "rendezvous/rendezvous.hpp"

TETHER_LAYER(6, "core");

namespace tether {

struct WorldConfig;

// The world's nodes, from the rendezvous table (after the rendezvous; immutable).
struct Topology {
  std::vector<int> nodeOf;   // world rank -> node (nodes numbered by their lowest world rank)
  std::vector<int> ranksOn;  // node -> ranks of the world on it
  // Some node runs more ranks than it has cores: latency is then set by CPU
  // time, and tree algorithms win. Every rank computes the same value.
  bool cpuBound = false;
  // The lowest rank whose plan settings (PeerAddress::plans) differ from
  // rank 0's; -1 when all agree. Every rank computes the same value.
  int plansDiffer = -1;
};

// The fingerprint this rank advertises (PeerAddress::plans): its collective
// settings (coll::planSettings) and its TETHER_MAX_PAYLOAD_BYTES.
std::uint64_t planFingerprint(std::uint64_t maxPayload);
// Before a collective `call` takes an id: Error{InvalidArgument} when the
// ranks' plan settings differ (they would run different plans, or cut frames
// into different parts), naming a rank that differs and this rank's settings.
void checkSamePlans(const Topology& t, int rank, std::uint64_t maxPayload, const char* call);

// Opens the TCP listener where `cfg` says — rank 0 at the root address (adopting
// the port createUniqueId() reserved), others on an ephemeral port of the
// interface that reaches the root — and returns the address to advertise.
// Throws Error{System} naming the rank and address.
PeerAddress openListener(boost::asio::io_context& io, const link::TcpOptions& options, const WorldConfig& cfg,
                         std::shared_ptr<link::Listener>& listener);

// The rendezvous' view of the world (rdv::Host): it opens, uses and releases
// links in the LinkTable through the connector; its end and its abort go to
// the world. Progress thread, but post() from any thread.
class RendezvousHost final : public rdv::Host {
 public:
  struct Events {
    std::function<void(std::exception_ptr)> finished;  // the rendezvous is complete (null) or failed
    std::function<void(const std::string&)> abortAll;  // tell every connected rank to stop
    std::function<void(rdv::Phase)> phase;             // a bring-up phase reached
    std::function<void(int peer)> dialing;             // a dial starts (counted)
  };

  RendezvousHost(boost::asio::io_context& io, int rank, std::chrono::milliseconds timeout, LinkTable& table,
                 link::Connector& connector, Events events)
      : io_(io), rank_(rank), timeout_(timeout), table_(table), connector_(connector), events_(std::move(events)) {}

  void connect(int peer, const PeerAddress& at) override;
  void send(int peer, wire::Kind kind, wire::SharedBytes payload) override;
  bool release(int peer) override;
  void post(std::function<void()> fn) override;
  void finished(std::exception_ptr error) override { events_.finished(std::move(error)); }
  void abortAll(const std::string& reason) override { events_.abortAll(reason); }
  void phase(rdv::Phase p) override { events_.phase(p); }
  std::string dialStatus(int peer) const override { return connector_.retrying(peer); }

 private:
  boost::asio::io_context& io_;
  const int rank_;
  const std::chrono::milliseconds timeout_;
  LinkTable& table_;
  link::Connector& connector_;
  Events events_;
};

// Nodes are told apart by their host id; `address(r)` is rank r's entry.
Topology learnTopology(int nranks, const std::function<PeerAddress(int)>& address);

}  // namespace tether

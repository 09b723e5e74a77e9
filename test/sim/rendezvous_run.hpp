// Runs a real rendezvous (lib/rendezvous/rendezvous.hpp) on the engine: one
// rdv::Rendezvous object per simulated rank, each talking to a simulated
// rdv::Host whose links and frames cost what the model says (payloads stay
// shared: a table sent to every rank is one buffer). Any factory with the
// seam's signature plugs in, by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine.hpp"
#include "rendezvous/rendezvous.hpp"
#include "report.hpp"

namespace tether::sim {

using RendezvousFactory = std::unique_ptr<rdv::Rendezvous> (*)(rdv::Host&, const rdv::Config&, const Params&);

struct RendezvousKind {
  const char* name;
  RendezvousFactory make;
  const char* what;
};

// "root", "tree", "auto": tether's rendezvous as TETHER_RENDEZVOUS names
// them; "auto" (the default) is what World makes of it: host-local
// aggregation (host_local.cpp, the table down the leaders' tree) unless
// TETHER_HOST_LOCAL=0, then rdv::make's tree or root star; "host-local":
// host-local aggregation whatever TETHER_HOST_LOCAL says; "no-host-local":
// auto with TETHER_HOST_LOCAL=0 (the one-host fit was made with it); "star": the anchor,
// a server that answers every rank with the whole table (anchor_star.cpp).
const std::vector<RendezvousKind>& rendezvousKinds();
// Throws std::invalid_argument naming the known kinds.
const RendezvousKind& findRendezvous(const std::string& name);
// tether's own choice: TETHER_RENDEZVOUS, else "auto" (as World).
std::string defaultRendezvous();

// The anchor star (anchor_star.cpp).
std::unique_ptr<rdv::Rendezvous> makeAnchorStar(rdv::Host& host, const rdv::Config& config);
// Host-local aggregation (host_local.cpp).
std::unique_ptr<rdv::Rendezvous> makeHostLocal(rdv::Host& host, const rdv::Config& config, const Params& params);

// The address a simulated rank advertises: 10.x.y.z by host, a port by its
// place on the host, the host's id and core count.
PeerAddress simAddress(int rank, const Params& params);

struct InitOutcome {
  OpResult result;
  // Like the real world's topology: some host (in rank 0's table) runs
  // more ranks than it has cores.
  bool cpuBound = false;
};

// Runs rendezvous `kind` on every rank, starting at engine.now() (rank 0
// then, the others spread by Params::startSpreadUs). Checks that it
// completes everywhere with the right addresses; throws std::runtime_error
// naming the first failure.
InitOutcome runRendezvous(Engine& engine, const std::string& kind, const std::string& who);

}  // namespace tether::sim

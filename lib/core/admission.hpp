// Admission: the connector's questions about incoming and dialled
// connections, answered from the LinkTable's rules (R4-R7 of
// docs/ordering.md): welcome, refuse or hold a hello, attach a finished
// handshake to the link it was dialled for (R5), and tell the rendezvous
// while the world is joining. Progress thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/layer.hpp"
#include "core/abort_channel.hpp"
#include "core/lifecycle.hpp"
#include "core/link_table.hpp"
#include "core/observe.hpp"
#include "link/connector.hpp"
#include "rendezvous/rendezvous.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class LinkAdmission final : public link::Admission {
 public:
  // `makeRoom`: applies the link budget before a new link is reserved.
  LinkAdmission(int rank, LinkTable& table, const Lifecycle& life, const AbortChannel& abort,
                std::function<void()> makeRoom)
      : rank_(rank), table_(table), life_(life), abort_(abort), makeRoom_(std::move(makeRoom)) {}

  // The rendezvous told of link events while the world is joining.
  void setRendezvous(rdv::Rendezvous& rendezvous) { rendezvous_ = &rendezvous; }
  // Where the first link after the rendezvous is stamped.
  void setInitClock(InitClock& clock) { clock_ = &clock; }
  // Where an authenticated observer's connection goes (ObserverDesk).
  void setObserverDesk(std::function<void(std::shared_ptr<link::Stream>)> desk) { desk_ = std::move(desk); }

  link::Verdict admit(int peer, std::uint32_t epoch, const std::string& remote) override;
  boost::asio::awaitable<void> predecessorClosed(int peer, link::Clock::time_point deadline) override;
  void connected(int peer, std::uint32_t epoch, std::shared_ptr<link::Stream> stream, bool dialedByUs) override;
  void connectFailed(int peer, std::uint32_t epoch, const link::ConnectFailure& failure) override;
  void refused(const link::Refusal& refusal) override;
  bool closing() const override { return life_.closing(); }
  bool mayRetry() const override { return !life_.closing() && !abort_.aborted(); }
  bool stillDialing(int peer, std::uint32_t epoch) const override { return table_.dialing(peer, epoch) != nullptr; }
  void observer(std::shared_ptr<link::Stream> stream) override {
    if (desk_) return desk_(std::move(stream));
    stream->close();
  }

  int linksOpened() const { return linksOpened_; }  // over the run, reopened ones included
  int peakLinks() const { return peakLinks_; }      // most links open at once

 private:
  const int rank_;
  LinkTable& table_;
  const Lifecycle& life_;
  const AbortChannel& abort_;
  std::function<void()> makeRoom_;
  rdv::Rendezvous* rendezvous_ = nullptr;
  InitClock* clock_ = nullptr;
  std::function<void(std::shared_ptr<link::Stream>)> desk_;
  int linksOpened_ = 0;
  int peakLinks_ = 0;
};

}  // namespace tether

#include "rendezvous/registration.hpp"

#include <fmt/format.h>

#include <atomic>

#include "base/join.hpp"
#include "base/log.hpp"

namespace tether::rdv {
namespace {

std::atomic<int> rankRegistrations{0};

const char* refusalText(wire::RejectCode code) {
  switch (code) {
    case wire::RejectCode::BadProof:
      return "wrong secret (it holds another job's UniqueId?)";
    case wire::RejectCode::WrongWorld:
      return "wrong world size";
    default:
      return "refused";
  }
}

}  // namespace

Registration::Registration(Host& host, Config config)
    : host_(host), cfg_(std::move(config)), registered_(cfg_.rank == 0 ? cfg_.nranks : 0) {}

void Registration::onRefused(const link::Refusal& r) {
  if (done_ || cfg_.rank != 0) return;
  std::string what = fmt::format("rank {} refused: {}, from {}", r.claimedRank, refusalText(r.code), r.remote);
  refusals_.push_back(what);
  // A valid proof of the secret with another world size comes from this job
  // (nobody else knows the secret), misconfigured: say so now instead of
  // waiting out the deadline. A wrong secret proves nothing about who sent it,
  // so it must not stop the job (a stranger could): it is named when the
  // rendezvous times out.
  if (r.code == wire::RejectCode::WrongWorld)
    failAll(ErrorCode::InvalidArgument, "rendezvous failed: " + what, r.claimedRank);
}

void Registration::onDuplicateClaim(int peer, const std::string& remote) {
  if (done_ || cfg_.rank != 0) return;
  failAll(ErrorCode::InvalidArgument,
          fmt::format("rendezvous failed: two processes claim rank {} (second from {})", peer, remote), peer);
}

void Registration::registerSelf(const PeerAddress& self) {
  registered_[0] = self;
  registeredCount_ = 1;
  selfAt_ = std::chrono::steady_clock::now();
  host_.phase(Phase::Registered);
}

bool Registration::add(int peer, const wire::Register& r, bool viaLeader) {
  const int who = static_cast<int>(r.rank);
  if (cfg_.rank != 0 || (!viaLeader && who != peer) || who < 0 || who >= cfg_.nranks || registered_.empty() ||
      registered_[who]) {
    log::warn(cfg_.rank, "ignored an unexpected registration from rank {} (claims rank {})", peer, r.rank);
    return false;
  }
  registered_[who] = r.address;
  ++registeredCount_;
  lastPeer_ = peer;
  lastAt_ = std::chrono::steady_clock::now();
  if (!viaLeader) ++rankRegistrations;
  log::trace(cfg_.rank, "rank {} registered ({}/{})", who, registeredCount_, cfg_.nranks);
  return true;
}

wire::AddressTable Registration::table() const {
  std::vector<PeerAddress> all;
  all.reserve(registered_.size());
  for (const auto& a : registered_) all.push_back(*a);
  return wire::AddressTable(all);
}

void Registration::forgetRegistrations() {
  registered_.clear();
  registered_.shrink_to_fit();
}

std::string Registration::missingText() const {
  std::vector<int> missing;
  for (int r = 0; r < static_cast<int>(registered_.size()); ++r)
    if (!registered_[r]) missing.push_back(r);
  std::string text =
      fmt::format("{} of {} ranks registered; missing ranks: {}", registeredCount_, cfg_.nranks, joined(missing, ", "));
  if (!refusals_.empty()) text += fmt::format("; refused meanwhile: {}", joined(refusals_, "; "));
  return text;
}

void Registration::registerWithRoot(const PeerAddress& self) {
  wire::Register reg{static_cast<std::uint32_t>(cfg_.rank), self};
  host_.connect(0, cfg_.root);
  host_.send(0, wire::Kind::Register, std::make_shared<const wire::Bytes>(wire::encode(reg)));  // sent once up
}

void Registration::complete(const std::string& how) {
  if (cfg_.rank == 0 && lastPeer_ >= 0)  // the straggler: its own INFO line says where its time went
    log::info(0, "rendezvous complete{}: {} ranks; the last registration came from rank {}, {:.1f} ms after the root's own", how,
              cfg_.nranks, lastPeer_, std::chrono::duration<double, std::milli>(lastAt_ - selfAt_).count());
  else if (cfg_.rank == 0)
    log::info(0, "rendezvous complete{}: {} ranks", how, cfg_.nranks);
  done_ = true;
  host_.finished(nullptr);
}

void Registration::fail(ErrorCode code, const std::string& what, int peer) {
  done_ = true;
  host_.finished(std::make_exception_ptr(Error(code, fmt::format("rank {}: {}", cfg_.rank, what), cfg_.rank, peer)));
}

void Registration::failAll(ErrorCode code, const std::string& what, int peer) {
  fail(code, what, peer);
  host_.abortAll(what);
}

int rankRegistrationsReceived() { return rankRegistrations.load(); }

}  // namespace tether::rdv

// tether/adapters/mscclpp.hpp — a runtime's abstract bootstrap, implemented by tether.
//
// Header-only, C++17. tether::adapters::BootstrapFor<Base> derives from a
// runtime's bootstrap base class and forwards every call to a tether::Bootstrap
// (a TcpBootstrap, a split() child, or an InProcessWorld rank in unit tests).
// For MSCCL++ the base is mscclpp::Bootstrap, whose pure virtual functions are
//
//   int getRank() const;  int getNranks() const;  int getNranksPerNode() const;
//   void send(void* data, int size, int peer, int tag);
//   void recv(void* data, int size, int peer, int tag);
//   void allGather(void* allData, int size);   // in place
//   void barrier();
//
// and, in MSCCL++ releases that have it, the virtual getNranksPerIpcDomain().
// Plugging it into MSCCL++ (docs/integration.md):
//
//   #include <mscclpp/core.hpp>
//   #include <tether/adapters/mscclpp.hpp>
//   #include <tether/tcp_bootstrap.hpp>
//
//   std::shared_ptr<tether::Bootstrap> tcp = tether::TcpBootstrap::fromEnvironment();
//   auto bootstrap = std::make_shared<tether::adapters::BootstrapFor<mscclpp::Bootstrap>>(tcp);
//   mscclpp::Communicator comm(bootstrap);
//
// What the adapter does as MSCCL++'s own TcpBootstrap does:
//  * Tags: any int. Tags >= 0 travel as themselves, a negative tag t as ~t on
//    a child communicator the constructor makes (split), so every int is its
//    own channel. The constructor is therefore collective: every rank of the
//    bootstrap constructs its adapter (as every rank initializes MSCCL++'s).
//  * recv(data, size, ...) accepts a message of up to `size` bytes and fills
//    what was sent; a longer message is an error ("message truncated"), after
//    which the next message on that (peer, tag) is still the next one sent.
//    Each send carries its size first (a 4-byte message, then the payload),
//    so the adapter's send/recv talk to the adapter's send/recv only.
//  * getNranksPerIpcDomain(): collective on its first call, then cached, as
//    MSCCL++'s: the ranks all-gather an IPC-domain key (the caller's
//    `ipcDomainKey`, e.g. a hash of the NVLink fabric's cluster UUID; by
//    default the node, as MSCCL++ without NVML fabric information), count the
//    ranks sharing this rank's key, and check MSCCL++'s layout rule (domains
//    of equal size, consecutive ranks).
//  * Errors: when the base is mscclpp::Bootstrap and <mscclpp/errors.hpp> is
//    on the include path, every failure is thrown as mscclpp::Error (Timeout,
//    Aborted, RemoteError for a lost peer or a peer's protocol breach,
//    InvalidUsage for a caller's mistake, SystemError) carrying tether's
//    message, with the tether::Error nested (std::rethrow_if_nested gives its
//    code, rank and peer). For another base, specialize
//    tether::adapters::ErrorsFor<Base>; by default the tether::Error is thrown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tether/bootstrap.hpp"
#include "tether/error.hpp"

#if __has_include(<mscclpp/errors.hpp>)
#include <mscclpp/errors.hpp>
#define TETHER_ADAPTER_HAS_MSCCLPP_ERRORS 1
namespace mscclpp {
class Bootstrap;  // complete or not: only is_base_of<mscclpp::Bootstrap, Base> is asked
}  // namespace mscclpp
#endif

namespace tether {
namespace adapters {

// How BootstrapFor<Base> reports a failure; called inside the catch block of
// the tether::Error. The default rethrows it.
template <class Base, class = void>
struct ErrorsFor {
  [[noreturn]] static void raise(const tether::Error&) { throw; }
};

#ifdef TETHER_ADAPTER_HAS_MSCCLPP_ERRORS
// MSCCL++'s own exception type, when the base is MSCCL++'s and its Error has
// MSCCL++'s (message, ErrorCode) constructor.
template <class Base>
struct ErrorsFor<
    Base, std::enable_if_t<std::is_base_of<mscclpp::Bootstrap, Base>::value &&
                           std::is_constructible<mscclpp::Error, const std::string&, mscclpp::ErrorCode>::value>> {
  static mscclpp::ErrorCode code(ErrorCode c) {
    switch (c) {
      case ErrorCode::Timeout:
        return mscclpp::ErrorCode::Timeout;
      case ErrorCode::Aborted:
        return mscclpp::ErrorCode::Aborted;
      case ErrorCode::PeerLost:
      case ErrorCode::Protocol:
        return mscclpp::ErrorCode::RemoteError;
      case ErrorCode::InvalidArgument:
        return mscclpp::ErrorCode::InvalidUsage;
      case ErrorCode::System:
        return mscclpp::ErrorCode::SystemError;
    }
    return mscclpp::ErrorCode::InternalError;
  }
  [[noreturn]] static void raise(const tether::Error& e) {
    std::throw_with_nested(mscclpp::Error(e.what(), code(e.code())));
  }
};
#endif

template <class Base>
class BootstrapFor : public Base {
 public:
  // `bootstrap` must not be null; the adapter shares its ownership. Collective
  // (see above). `ipcDomainKey` (optional) gives this rank's IPC domain for
  // getNranksPerIpcDomain(); ranks with equal keys share a domain.
  explicit BootstrapFor(std::shared_ptr<tether::Bootstrap> bootstrap, std::function<std::uint64_t()> ipcDomainKey = {})
      : bootstrap_(std::move(bootstrap)), ipcDomainKey_(std::move(ipcDomainKey)) {
    guarded([&] {
      if (!bootstrap_) throw Error(ErrorCode::InvalidArgument, "BootstrapFor: the tether bootstrap is null");
      negative_ = bootstrap_->split(0, bootstrap_->rank());
    });
  }

  // The base's other send/recv overloads (MSCCL++'s std::vector<char> ones)
  // stay visible next to the overrides.
  using Base::recv;
  using Base::send;

  int getRank() const override { return bootstrap_->rank(); }
  int getNranks() const override { return bootstrap_->size(); }
  int getNranksPerNode() const override { return bootstrap_->nranksPerNode(); }

  void send(void* data, int size, int peer, int tag) override {
    guarded([&] {
      const std::uint32_t length = bytes(size, "send");
      tether::Bootstrap& via = channel(tag);
      std::lock_guard<std::mutex> lock(pairLock(peer, tag, true));
      via.send(&length, sizeof length, peer, wireTag(tag));
      if (length > 0) via.send(data, length, peer, wireTag(tag));
    });
  }

  void recv(void* data, int size, int peer, int tag) override {
    guarded([&] {
      const std::uint32_t room = bytes(size, "recv");
      tether::Bootstrap& via = channel(tag);
      std::lock_guard<std::mutex> lock(pairLock(peer, tag, false));
      std::uint32_t length = 0;
      via.recv(&length, sizeof length, peer, wireTag(tag));
      if (length <= room) {
        if (length > 0) via.recv(data, length, peer, wireTag(tag));
        return;
      }
      std::vector<unsigned char> dropped(length);  // keeps the next message next
      via.recv(dropped.data(), length, peer, wireTag(tag));
      throw Error(ErrorCode::InvalidArgument,
                  where("recv") + " from peer " + std::to_string(peer) + " tag " + std::to_string(tag) +
                      ": message truncated: received " + std::to_string(length) + " bytes, the buffer holds " +
                      std::to_string(room),
                  bootstrap_->rank(), peer);
    });
  }

  void allGather(void* allData, int size) override {
    guarded([&] { bootstrap_->allgather(allData, bytes(size, "allGather")); });
  }
  void barrier() override {
    guarded([&] { bootstrap_->barrier(); });
  }

  // Overrides MSCCL++'s virtual where the base has it (no `override`: older
  // bases do not declare it). See the notes above.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Winconsistent-missing-override"
#pragma clang diagnostic ignored "-Wsuggest-override"
#elif defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsuggest-override"
#endif
  int getNranksPerIpcDomain() const {
    std::lock_guard<std::mutex> lock(ipcDomainMutex_);
    if (nranksPerIpcDomain_ == 0) nranksPerIpcDomain_ = guarded([&] { return countIpcDomain(); });
    return nranksPerIpcDomain_;
  }
#if defined(__clang__)
#pragma clang diagnostic pop
#elif defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

  // The tether bootstrap underneath (for split(), abort(), setTimeout(), ...).
  tether::Bootstrap& underlying() const { return *bootstrap_; }

 private:
  template <class Call>
  static auto guarded(Call call) -> decltype(call()) {
    try {
      return call();
    } catch (const tether::Error& e) {
      ErrorsFor<Base>::raise(e);
    }
  }

  std::string where(const char* op) const { return "rank " + std::to_string(bootstrap_->rank()) + ": " + op; }

  std::uint32_t bytes(int size, const char* op) const {
    if (size < 0)
      throw Error(ErrorCode::InvalidArgument, where(op) + ": negative size " + std::to_string(size),
                  bootstrap_->rank());
    return static_cast<std::uint32_t>(size);
  }

  // Every int is its own channel: t >= 0 as t, t < 0 as ~t on the child.
  tether::Bootstrap& channel(int tag) const { return tag >= 0 ? *bootstrap_ : *negative_; }
  static int wireTag(int tag) { return tag >= 0 ? tag : ~tag; }

  // A send (or recv) is two messages; one lock per (peer, tag, direction)
  // keeps two threads' pairs on one channel from interleaving.
  std::mutex& pairLock(int peer, int tag, bool sending) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = pairLocks_[std::make_tuple(peer, tag, sending)];
    if (!slot) slot = std::make_unique<std::mutex>();
    return *slot;
  }

  int countIpcDomain() const {
    const int n = bootstrap_->size(), rank = bootstrap_->rank();
    std::vector<std::uint64_t> keys(static_cast<std::size_t>(n));
    keys[static_cast<std::size_t>(rank)] =
        ipcDomainKey_ ? ipcDomainKey_() : static_cast<std::uint64_t>(bootstrap_->nodeId());
    bootstrap_->allgather(keys.data(), sizeof(std::uint64_t));
    std::map<std::uint64_t, int> counts;
    for (auto key : keys) ++counts[key];
    const int mine = counts[keys[static_cast<std::size_t>(rank)]];
    const std::string rule =
        where("getNranksPerIpcDomain") + ": IPC domain ranks must have the same size and be consecutive ranks";
    if (n % mine != 0)
      throw Error(ErrorCode::InvalidArgument,
                  rule + ": " + std::to_string(n) + " ranks are not a multiple of " + std::to_string(mine), rank);
    for (const auto& entry : counts)
      if (entry.second != mine)
        throw Error(ErrorCode::InvalidArgument,
                    rule + ": domains of " + std::to_string(entry.second) + " and " + std::to_string(mine) + " ranks",
                    rank);
    for (int r = 0; r < n; ++r)
      if (keys[static_cast<std::size_t>(r)] != keys[static_cast<std::size_t>(r - r % mine)])
        throw Error(
            ErrorCode::InvalidArgument,
            rule + ": rank " + std::to_string(r) + " is not in the domain of rank " + std::to_string(r - r % mine),
            rank);
    return mine;
  }

  std::shared_ptr<tether::Bootstrap> bootstrap_;
  std::shared_ptr<tether::Bootstrap> negative_;  // negative tags' channels
  std::function<std::uint64_t()> ipcDomainKey_;
  mutable std::mutex mutex_;           // pairLocks_
  mutable std::mutex ipcDomainMutex_;  // nranksPerIpcDomain_
  mutable std::map<std::tuple<int, int, bool>, std::unique_ptr<std::mutex>> pairLocks_;
  mutable int nranksPerIpcDomain_ = 0;
};

}  // namespace adapters
}  // namespace tether

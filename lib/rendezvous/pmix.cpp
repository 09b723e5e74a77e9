// PMIx rendezvous: every rank puts its listen address in the launcher's PMIx
// key-value store (key "tether.addr"), fences with data collection, and reads
// every other rank's. No root, no TCP until the table is known. PMIx calls
// block, so they run on a helper thread; the results come back to the
// progress thread through Host::post. Built only with libpmix
// (TETHER_HAVE_PMIX).
#include <fmt/format.h>
#include <pmix.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/log.hpp"
#include "rendezvous/pmix_calls.hpp"
#include "rendezvous/rendezvous.hpp"
#include "tether/error.hpp"
#include "wire/handshake.hpp"

namespace tether::rdv {
namespace {

constexpr const char* kKey = "tether.addr";

// An integer value of any of the types a PMIx server may use; -1 otherwise.
std::int64_t valueNumber(const pmix_value_t& v) {
  switch (v.type) {
    case PMIX_UINT32:
      return v.data.uint32;
    case PMIX_INT:
      return v.data.integer;
    case PMIX_UINT64:
      return static_cast<std::int64_t>(v.data.uint64);
    case PMIX_SIZE:
      return static_cast<std::int64_t>(v.data.size);
    default:
      return -1;
  }
}

// What the helper thread found: the table, or the failing operation's text.
struct Outcome {
  std::vector<PeerAddress> table;
  std::string error;
  ErrorCode code = ErrorCode::System;
};

// Owns a pmix_info_t array.
class Infos {
 public:
  explicit Infos(std::size_t n) : n_(n) { PMIX_INFO_CREATE(info_, n_); }
  ~Infos() { PMIX_INFO_FREE(info_, n_); }
  Infos(const Infos&) = delete;
  Infos& operator=(const Infos&) = delete;
  pmix_info_t* get() { return info_; }
  std::size_t size() const { return n_; }

 private:
  pmix_info_t* info_ = nullptr;
  std::size_t n_;
};

class Pmix final : public Rendezvous {
 public:
  Pmix(Host& host, Config config) : host_(host), cfg_(std::move(config)), alive_(std::make_shared<int>(0)) {}

  ~Pmix() override {
    // The fence and the gets carry PMIX_TIMEOUT (the rendezvous timeout), so
    // this join ends: at worst that long after the deadline.
    if (worker_.joinable()) worker_.join();
  }

  void start(const PeerAddress& self) override {
    std::weak_ptr<int> alive = alive_;
    worker_ = std::thread([this, self, alive] {
      Outcome out = exchange(self);
      // `this` outlives the thread (the destructor joins it); the posted
      // function may run later, so it checks that the object still exists.
      host_.post([this, alive, out = std::move(out)]() mutable {
        if (alive.expired()) return;
        onOutcome(std::move(out));
      });
    });
  }

  bool onFrame(int, wire::Kind, wire::SharedBytes) override { return false; }
  void onLinkUp(int) override {}
  void onLinkDown(int, const std::string&, bool) override {}
  void onConnectFailed(int, const link::ConnectFailure&) override {}
  void onRefused(const link::Refusal&) override {}
  void onDuplicateClaim(int, const std::string&) override {}

  void onTimeout() override {
    if (done_) return;
    done_ = true;
    host_.finished(std::make_exception_ptr(
        Error(ErrorCode::Timeout,
              fmt::format("rank {}: rendezvous (pmix) timed out after {} ms: the PMIx fence over {} ranks did not "
                          "complete (are all ranks of the job calling it, with TETHER_RENDEZVOUS=pmix?)",
                          cfg_.rank, cfg_.timeout.count(), cfg_.nranks),
              cfg_.rank)));
  }

  bool done() const override { return done_; }
  PeerAddress address(int rank) const override { return table_.at(static_cast<std::uint32_t>(rank)); }

 private:
  Outcome failed(const char* op, pmix_status_t rc) const {
    Outcome o;
    o.error = fmt::format("rank {}: rendezvous (pmix): {} failed: {}", cfg_.rank, op, PMIx_Error_string(rc));
    o.code = rc == PMIX_ERR_TIMEOUT ? ErrorCode::Timeout : ErrorCode::System;
    return o;
  }

  Outcome misfit(const std::string& what) const {
    Outcome o;
    o.error = fmt::format("rank {}: rendezvous (pmix): {}", cfg_.rank, what);
    o.code = ErrorCode::InvalidArgument;
    return o;
  }

  // Helper thread: the whole PMIx exchange.
  Outcome exchange(const PeerAddress& self) {
    if (auto why = loadPmix(); !why.empty()) {
      Outcome o;
      o.error = fmt::format("rank {}: rendezvous (pmix): {}", cfg_.rank, why);
      return o;
    }
    pmix_proc_t me;
    PMIX_PROC_CONSTRUCT(&me);
    pmix_status_t rc = PMIx_Init(&me, nullptr, 0);  // reference counted: reuses an initialized client
    if (rc != PMIX_SUCCESS) return failed("PMIx_Init", rc);
    Outcome out = exchangeInitialized(me, self);
    PMIx_Finalize(nullptr, 0);
    return out;
  }

  Outcome exchangeInitialized(const pmix_proc_t& me, const PeerAddress& self) {
    if (static_cast<int>(me.rank) != cfg_.rank)
      return misfit(fmt::format("PMIx says this process is rank {} of namespace '{}', but tether was given rank {}",
                                me.rank, me.nspace, cfg_.rank));
    pmix_proc_t job;
    PMIX_PROC_CONSTRUCT(&job);
    PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
    {
      pmix_value_t* v = nullptr;
      pmix_status_t rc = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &v);
      if (rc != PMIX_SUCCESS) return failed("PMIx_Get(PMIX_JOB_SIZE)", rc);
      std::int64_t size = valueNumber(*v);
      PMIX_VALUE_RELEASE(v);
      if (static_cast<int>(size) != cfg_.nranks)
        return misfit(
            fmt::format("PMIx namespace '{}' has {} ranks, but tether was given {}", me.nspace, size, cfg_.nranks));
    }

    auto mine = wire::AddressTable(std::vector<PeerAddress>{self}).encoded();
    pmix_value_t val;
    PMIX_VALUE_CONSTRUCT(&val);
    val.type = PMIX_BYTE_OBJECT;
    val.data.bo.bytes = const_cast<char*>(reinterpret_cast<const char*>(mine->data()));
    val.data.bo.size = mine->size();
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, kKey, &val);  // copies the value
    if (rc != PMIX_SUCCESS) return failed("PMIx_Put", rc);
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) return failed("PMIx_Commit", rc);

    const int timeoutS = static_cast<int>(std::max<std::int64_t>(1, (cfg_.timeout.count() + 999) / 1000));
    {
      Infos info(2);
      bool collect = true;
      PMIX_INFO_LOAD(&info.get()[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
      PMIX_INFO_LOAD(&info.get()[1], PMIX_TIMEOUT, &timeoutS, PMIX_INT);
      rc = PMIx_Fence(&job, 1, info.get(), info.size());
      if (rc != PMIX_SUCCESS) return failed("PMIx_Fence", rc);
    }

    Outcome out;
    out.table.resize(static_cast<std::size_t>(cfg_.nranks));
    Infos info(1);
    PMIX_INFO_LOAD(&info.get()[0], PMIX_TIMEOUT, &timeoutS, PMIX_INT);
    for (int r = 0; r < cfg_.nranks; ++r) {
      if (r == cfg_.rank) {
        out.table[r] = self;
        continue;
      }
      pmix_proc_t peer;
      PMIX_PROC_CONSTRUCT(&peer);
      PMIX_LOAD_PROCID(&peer, me.nspace, static_cast<pmix_rank_t>(r));
      pmix_value_t* v = nullptr;
      rc = PMIx_Get(&peer, kKey, info.get(), info.size(), &v);
      if (rc != PMIX_SUCCESS) return failed(fmt::format("PMIx_Get('{}' of rank {})", kKey, r).c_str(), rc);
      if (v->type != PMIX_BYTE_OBJECT) {
        PMIX_VALUE_RELEASE(v);
        return misfit(fmt::format("rank {}'s '{}' is not a byte object", r, kKey));
      }
      auto bytes = std::make_shared<const wire::Bytes>(
          reinterpret_cast<const unsigned char*>(v->data.bo.bytes),
          reinterpret_cast<const unsigned char*>(v->data.bo.bytes) + v->data.bo.size);
      PMIX_VALUE_RELEASE(v);
      try {
        out.table[r] = wire::AddressTable(bytes, 1).at(0);
      } catch (const std::exception& e) {
        return misfit(fmt::format("rank {}'s '{}' is malformed: {}", r, kKey, e.what()));
      }
    }
    return out;
  }

  // Progress thread.
  void onOutcome(Outcome out) {
    if (done_) return;  // timed out meanwhile
    done_ = true;
    if (!out.error.empty()) {
      host_.finished(std::make_exception_ptr(Error(out.code, out.error, cfg_.rank)));
      return;
    }
    table_ = wire::AddressTable(out.table);
    log::trace(cfg_.rank, "rendezvous (pmix): learned {} addresses", cfg_.nranks);
    host_.finished(nullptr);
  }

  Host& host_;
  Config cfg_;
  std::shared_ptr<int> alive_;  // expires with this object: posted results check it
  std::thread worker_;
  bool done_ = false;
  wire::AddressTable table_;
};

}  // namespace

PmixRankSize pmixRankAndSize() {
  if (auto why = loadPmix(); !why.empty()) throw Error(ErrorCode::System, "fromEnvironment: " + why);
  pmix_proc_t me;
  PMIX_PROC_CONSTRUCT(&me);
  pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS)
    throw Error(ErrorCode::System, fmt::format("fromEnvironment: PMIx_Init failed: {}", PMIx_Error_string(rc)));
  pmix_proc_t job;
  PMIX_PROC_CONSTRUCT(&job);
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* v = nullptr;
  rc = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &v);
  std::int64_t size = -1;
  if (rc == PMIX_SUCCESS) {
    size = valueNumber(*v);
    PMIX_VALUE_RELEASE(v);
  }
  // Stays initialized until exit: a finalize here and a second PMIx_Init in the
  // rendezvous lost peers' keys (PMIx_Get: NOT-FOUND, 1 run in 3 with PMIx
  // 4.2.2), and a launcher counts a client that never finalizes as an abnormal
  // exit.
  static const bool finalizeAtExit = [] { return std::atexit([] { PMIx_Finalize(nullptr, 0); }) == 0; }();
  (void)finalizeAtExit;
  if (rc != PMIX_SUCCESS)
    throw Error(ErrorCode::System,
                fmt::format("fromEnvironment: PMIx_Get(PMIX_JOB_SIZE) failed: {}", PMIx_Error_string(rc)));
  if (size < 1 || size > (1 << 30) || static_cast<std::int64_t>(me.rank) >= size)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("fromEnvironment: PMIx gives rank {} of a job of {} ranks", me.rank, size));
  return {static_cast<int>(me.rank), static_cast<int>(size)};
}

std::unique_ptr<Rendezvous> makePmix(Host& host, const Config& config) { return std::make_unique<Pmix>(host, config); }

}  // namespace tether::rdv

#include "link/memory_stream.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <deque>
#include <limits>
#include <stdexcept>
#include <unordered_map>

namespace tether::link {
namespace {

using boost::system::error_code;
using boost::system::system_error;

// Waits until `timer` is cancelled (the pipe's state changed).
asio::awaitable<void> nudged(asio::steady_timer& timer) {
  timer.expires_at(asio::steady_timer::time_point::max());
  error_code ignored;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

// One direction of a pair.
struct Pipe {
  explicit Pipe(asio::io_context& io) : readWait(io), writeWait(io) {}
  std::deque<unsigned char> bytes;
  bool writerClosed = false;  // EOF once `bytes` are read
  bool readerClosed = false;  // writes fail
  asio::steady_timer readWait, writeWait;
};

struct Pair {
  Pair(asio::io_context& io, MemoryOptions o) : options(o), rng(o.seed), pipes{Pipe(io), Pipe(io)} {}
  std::size_t chunk() {
    if (options.maxChunk == 0) return std::numeric_limits<std::size_t>::max();
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return 1 + (rng >> 33) % options.maxChunk;
  }
  const MemoryOptions options;
  std::uint64_t rng;
  Pipe pipes[2];  // pipes[i]: what side i reads
};

class MemoryStream final : public Stream, public std::enable_shared_from_this<MemoryStream> {
 public:
  MemoryStream(asio::io_context& io, std::shared_ptr<MemoryNetwork::State> net, std::string peer)
      : io_(io), net_(std::move(net)), peer_(std::move(peer)) {}
  MemoryStream(asio::io_context& io, std::shared_ptr<Pair> pair, int side, std::string peer)
      : io_(io), pair_(std::move(pair)), side_(side), peer_(std::move(peer)) {}

  asio::awaitable<void> connect(const Endpoint& to) override;

  void readSome(asio::mutable_buffer buf, ReadDone& done, std::shared_ptr<void> keep) override {
    asio::post(io_, [self = shared_from_this(), buf, &done, keep = std::move(keep)]() mutable {
      self->tryRead(buf, done, std::move(keep));
    });
  }

  // readSome's try: what has arrived, EOF or an error goes to `done`; else it
  // waits until the pipe's state changes and tries again.
  void tryRead(asio::mutable_buffer buf, ReadDone& done, std::shared_ptr<void> keep) {
    error_code ec;
    const std::size_t got = readSomeNow(buf, ec);
    if (ec != asio::error::would_block) return done.onRead(ec, got, std::move(keep));
    asio::steady_timer& wait = pair_->pipes[side_].readWait;
    wait.expires_at(asio::steady_timer::time_point::max());
    wait.async_wait([self = shared_from_this(), buf, &done, keep = std::move(keep)](error_code) mutable {
      self->tryRead(buf, done, std::move(keep));
    });
  }

  // What has arrived, without waiting (would_block when nothing has).
  std::size_t readSomeNow(asio::mutable_buffer buf, error_code& ec) {
    ec.clear();
    if (!usable(ec)) return 0;
    Pipe& in = pair_->pipes[side_];
    std::size_t n = std::min({buf.size(), in.bytes.size(), pair_->chunk()});
    if (n == 0) {
      if (buf.size() == 0) return 0;
      if (in.writerClosed)
        ec = asio::error::eof;
      else
        ec = asio::error::would_block;
      return 0;
    }
    std::copy_n(in.bytes.begin(), n, static_cast<unsigned char*>(buf.data()));
    in.bytes.erase(in.bytes.begin(), in.bytes.begin() + static_cast<std::ptrdiff_t>(n));
    in.writeWait.cancel();  // room for the peer's writer
    return n;
  }

  // Until readSomeNow() would return bytes, EOF or an error.
  asio::awaitable<void> readable() {
    for (;;) {
      error_code ec;
      if (!usable(ec)) throw system_error(ec);
      Pipe& in = pair_->pipes[side_];
      if (!in.bytes.empty() || in.writerClosed) co_return;
      co_await nudged(in.readWait);
    }
  }

  asio::awaitable<void> read(asio::mutable_buffer buf) override {
    while (buf.size() != 0) {
      error_code ec;
      std::size_t got = readSomeNow(buf, ec);
      if (ec == asio::error::would_block) {
        co_await readable();
        continue;
      }
      if (ec) throw system_error(ec);
      buf += got;
    }
  }

  std::size_t writeSomeNow(std::span<const asio::const_buffer> bufs, error_code& ec) override {
    ec.clear();
    if (!usable(ec)) return 0;
    Pipe& out = pair_->pipes[1 - side_];
    if (out.readerClosed) {
      ec = asio::error::broken_pipe;
      return 0;
    }
    std::size_t room = pair_->options.capacity == 0
                           ? std::numeric_limits<std::size_t>::max()
                           : pair_->options.capacity - std::min(pair_->options.capacity, out.bytes.size());
    std::size_t written = 0;
    for (const auto& b : bufs) {
      std::size_t n = std::min(b.size(), room - written);
      auto* p = static_cast<const unsigned char*>(b.data());
      out.bytes.insert(out.bytes.end(), p, p + n);
      written += n;
      if (n < b.size()) break;
    }
    if (written == 0 && asio::buffer_size(bufs) != 0) ec = asio::error::would_block;
    if (written) out.readWait.cancel();
    return written;
  }

  asio::awaitable<void> write(std::vector<asio::const_buffer> bufs) override {
    auto rest = bufs.begin();
    while (rest != bufs.end()) {
      error_code ec;
      std::size_t n = writeSomeNow(std::span(&*rest, static_cast<std::size_t>(bufs.end() - rest)), ec);
      if (ec == asio::error::would_block) {
        co_await nudged(pair_->pipes[1 - side_].writeWait);
        continue;
      }
      if (ec) throw system_error(ec);
      for (; rest != bufs.end() && n >= rest->size(); ++rest) n -= rest->size();
      if (rest != bufs.end()) *rest += n;
      while (rest != bufs.end() && rest->size() == 0) ++rest;
    }
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    if (!pair_) return;
    Pipe& in = pair_->pipes[side_];
    Pipe& out = pair_->pipes[1 - side_];
    in.readerClosed = true;
    in.bytes.clear();
    out.writerClosed = true;
    for (Pipe* p : {&in, &out}) {
      p->readWait.cancel();
      p->writeWait.cancel();
    }
  }

  const std::string& peer() const override { return peer_; }
  asio::any_io_executor executor() override { return io_.get_executor(); }

 private:
  bool usable(error_code& ec) const {
    if (closed_)
      ec = asio::error::operation_aborted;
    else if (!pair_)
      ec = asio::error::not_connected;
    return !ec;
  }

  asio::io_context& io_;
  std::shared_ptr<MemoryNetwork::State> net_;  // unconnected: where connect() looks
  std::shared_ptr<Pair> pair_;
  int side_ = 0;
  std::string peer_;
  bool closed_ = false;
};

class MemoryListener final : public Listener {
 public:
  MemoryListener(asio::io_context& io, std::shared_ptr<MemoryNetwork::State> net, std::string name)
      : net_(std::move(net)), name_(std::move(name)), wake_(io) {}
  ~MemoryListener() override { close(); }

  asio::awaitable<std::shared_ptr<Stream>> accept() override {
    for (;;) {
      if (!open_) throw system_error(asio::error::operation_aborted);
      if (!pending_.empty()) {
        auto s = std::move(pending_.front());
        pending_.pop_front();
        co_return s;
      }
      co_await nudged(wake_);
    }
  }
  Endpoint address() const override { return Endpoint{"mem", name_}; }
  bool isOpen() const override { return open_; }
  void close() override;

  void arrive(std::shared_ptr<Stream> s) {
    pending_.push_back(std::move(s));
    wake_.cancel();
  }

 private:
  std::shared_ptr<MemoryNetwork::State> net_;
  const std::string name_;
  asio::steady_timer wake_;
  std::deque<std::shared_ptr<Stream>> pending_;  // connected, not accepted yet
  bool open_ = true;
};

}  // namespace

struct MemoryNetwork::State {
  State(asio::io_context& i, MemoryOptions o) : io(i), options(o) {}
  asio::io_context& io;
  const MemoryOptions options;
  std::unordered_map<std::string, MemoryListener*> listeners;
  std::uint64_t dials = 0;
};

namespace {

void MemoryListener::close() {
  if (!open_) return;
  open_ = false;
  net_->listeners.erase(name_);
  pending_.clear();
  wake_.cancel();
}

asio::awaitable<void> MemoryStream::connect(const Endpoint& to) {
  if (to.kind != "mem") throw std::invalid_argument("a memory stream cannot connect to a '" + to.kind + "' endpoint");
  if (closed_) throw system_error(asio::error::operation_aborted);
  if (pair_) throw system_error(asio::error::already_connected);
  auto it = net_->listeners.find(to.address);
  if (it == net_->listeners.end()) throw system_error(asio::error::connection_refused);
  auto pair = std::make_shared<Pair>(
      io_, MemoryOptions{net_->options.maxChunk, net_->options.capacity, net_->options.seed + ++net_->dials});
  peer_ = "mem:" + to.address;
  it->second->arrive(std::make_shared<MemoryStream>(io_, pair, 1, "mem:dialer" + std::to_string(net_->dials)));
  pair_ = std::move(pair);
  side_ = 0;
  co_return;
}

}  // namespace

std::pair<std::shared_ptr<Stream>, std::shared_ptr<Stream>> memoryPair(asio::io_context& io, MemoryOptions options,
                                                                       std::string nameA, std::string nameB) {
  auto pair = std::make_shared<Pair>(io, options);
  return {std::make_shared<MemoryStream>(io, pair, 0, nameB), std::make_shared<MemoryStream>(io, pair, 1, nameA)};
}

MemoryNetwork::MemoryNetwork(asio::io_context& io, MemoryOptions options)
    : state_(std::make_shared<State>(io, options)) {}

MemoryNetwork::~MemoryNetwork() = default;

std::shared_ptr<Listener> MemoryNetwork::listen(const std::string& name) {
  if (state_->listeners.count(name)) throw std::invalid_argument("memory endpoint '" + name + "' is taken");
  auto l = std::make_shared<MemoryListener>(state_->io, state_, name);
  state_->listeners[name] = l.get();
  return l;
}

std::shared_ptr<Stream> MemoryNetwork::open() { return std::make_shared<MemoryStream>(state_->io, state_, "?"); }

}  // namespace tether::link

// A TCP link's read (lib/link/drained_read.hpp) does not try recv at once
// after a read that drained the socket: it waits for the readiness edge. And
// it never waits where no edge will come: the peer's close or reset that came
// with its last bytes is read at once. Reads are counted here by wrapping
// recv(2) and recvmsg(2) in this test binary, per descriptor.
#include <catch2/catch.hpp>
#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/system_error.hpp>
#include <cerrno>
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <vector>

#include "link/drained_read.hpp"
#include "link/socket_stream.hpp"
#include "read_pair.hpp"

namespace {
std::atomic<int> gWatched{-1};  // the descriptor whose receives are counted
std::atomic<int> gCalls{0}, gWouldBlock{0};

void count(int fd, ssize_t n, int err) {
  if (fd != gWatched.load()) return;
  ++gCalls;
  if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK)) ++gWouldBlock;
}
}  // namespace

extern "C" ssize_t recv(int fd, void* buf, size_t len, int flags) {
  using Recv = ssize_t (*)(int, void*, size_t, int);
  static const Recv next = reinterpret_cast<Recv>(::dlsym(RTLD_NEXT, "recv"));
  const ssize_t n = next(fd, buf, len, flags);
  const int err = errno;
  count(fd, n, err);
  errno = err;
  return n;
}

extern "C" ssize_t recvmsg(int fd, struct msghdr* m, int flags) {
  using Recvmsg = ssize_t (*)(int, struct msghdr*, int);
  static const Recvmsg next = reinterpret_cast<Recvmsg>(::dlsym(RTLD_NEXT, "recvmsg"));
  const ssize_t n = next(fd, m, flags);
  const int err = errno;
  count(fd, n, err);
  errno = err;
  return n;
}

using namespace tether;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// A connected TCP pair whose reader has the drain hint on (as a link's socket).
struct Pair : test::ReadPair<tcp::socket> {
  explicit Pair(asio::io_context& io) : ReadPair(connected(io)) { gWatched = readerFd; }
  ~Pair() { gWatched = -1; }
  static std::pair<tcp::socket, tcp::socket> connected(asio::io_context& io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    tcp::socket writer(io);
    writer.connect(acceptor.local_endpoint());
    tcp::socket reader = acceptor.accept();
    reader.non_blocking(true);
    link::enableDrainHint(reader.native_handle());
    readerFd = reader.native_handle();
    gCalls = 0;
    gWouldBlock = 0;
    return {std::move(writer), std::move(reader)};
  }
  // Abortive close: the kernel sends a reset, not a FIN.
  void resetWriter() {
    writer.set_option(asio::socket_base::linger(true, 0));
    writer.close();
  }
  static inline int readerFd = -1;
};

boost::system::error_code readError(Pair& p, asio::io_context& io, std::vector<unsigned char>& buf) {
  p.start(io, buf);
  try {
    p.finish(io);
  } catch (const boost::system::system_error& e) {
    return e.code();
  }
  FAIL("the read got " << *p.result << " bytes, not an error");
  return {};
}

}  // namespace

TEST_CASE("a read started after a draining read waits for readiness: no failed recv per message", "[unit][link]") {
  asio::io_context io;
  Pair p(io);
  std::vector<unsigned char> buf(1024);
  constexpr int kMessages = 50;
  for (int i = 0; i < kMessages; ++i) {
    p.start(io, buf);  // nothing has arrived: the read waits
    CHECK_FALSE(p.result);
    std::vector<unsigned char> msg(64, static_cast<unsigned char>(i));
    asio::write(p.writer, asio::buffer(msg));
    p.finish(io);
    REQUIRE(*p.result == msg.size());  // short: 64 of 1,024
    CHECK(std::equal(msg.begin(), msg.end(), buf.begin()));
  }
  INFO("recv calls " << gCalls.load() << ", of which failed with EAGAIN " << gWouldBlock.load());
  if (link::kDrainedReadActive) {
    // Only the very first read tries first (and fails): after it every read
    // followed a draining one. Plain async_read_some fails once per message.
    CHECK(gWouldBlock.load() == 1);
    CHECK(gCalls.load() == kMessages + 1);
  } else {
    CHECK(gWouldBlock.load() == kMessages);
  }
}

TEST_CASE("reads that fill their buffer keep reading at once; the bytes arrive whole, then EOF", "[unit][link]") {
  asio::io_context io;
  Pair p(io);
  std::vector<unsigned char> sent(10000);
  for (std::size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<unsigned char>(i * 7);
  asio::write(p.writer, asio::buffer(sent));
  std::vector<unsigned char> got, buf(1000);
  for (int i = 0; i < 10; ++i) {
    p.start(io, buf);
    p.finish(io);
    REQUIRE(*p.result == buf.size());
    got.insert(got.end(), buf.begin(), buf.end());
  }
  CHECK(got == sent);
  CHECK(gWouldBlock.load() == 0);
  // A short read, then the rest arrives in two writes, then the peer closes.
  asio::write(p.writer, asio::buffer(sent.data(), 100));
  p.start(io, buf);
  p.finish(io);
  CHECK(*p.result == 100);
  p.start(io, buf);  // drained: waits without a try
  CHECK_FALSE(p.result);
  asio::write(p.writer, asio::buffer(sent.data(), 1500));
  p.finish(io);
  CHECK(*p.result == 1000);
  p.start(io, buf);  // full: the next one tries at once and gets the rest
  p.finish(io);
  CHECK(*p.result == 500);
  p.writer.close();
  CHECK(readError(p, io, buf) == asio::error::eof);
}

TEST_CASE("closing the stream ends a read that waits after a draining read with operation_aborted", "[unit][link]") {
  asio::io_context io;
  Pair p(io);
  std::vector<unsigned char> buf(1024), msg(10, 1);
  asio::write(p.writer, asio::buffer(msg));
  p.start(io, buf);
  p.finish(io);
  CHECK(*p.result == msg.size());
  p.start(io, buf);
  CHECK_FALSE(p.result);
  p.stream->close();
  try {
    p.finish(io);
    FAIL("the read did not end");
  } catch (const boost::system::system_error& e) {
    CHECK(e.code() == asio::error::operation_aborted);
  }
}

// The peer's last bytes and then its end (`end`), both before the reactor
// looks: the read takes the bytes, and the next one must end with `expected`,
// not wait for an edge that was already reported.
void lastBytesThen(void (*end)(Pair&), boost::system::error_code expected) {
  asio::io_context io;
  Pair p(io);
  std::vector<unsigned char> buf(1024), msg(64, 3);
  p.start(io, buf);  // waits
  asio::write(p.writer, asio::buffer(msg));
  end(p);
  p.finish(io);
  CHECK(*p.result == msg.size());
  CHECK(readError(p, io, buf) == expected);
}

TEST_CASE("the peer's last bytes and its close arriving together: the read after the bytes ends with EOF",
          "[unit][link]") {
  lastBytesThen([](Pair& p) { p.writer.close(); }, asio::error::eof);
}

TEST_CASE("the peer's last bytes and its reset arriving together: the read after the bytes ends with the reset",
          "[unit][link]") {
  lastBytesThen([](Pair& p) { p.resetWriter(); }, asio::error::connection_reset);
}

TEST_CASE("the peer's reset after a draining read: the waiting read ends with the reset", "[unit][link]") {
  asio::io_context io;
  Pair p(io);
  std::vector<unsigned char> buf(1024), msg(64, 5);
  p.start(io, buf);
  asio::write(p.writer, asio::buffer(msg));
  p.finish(io);
  CHECK(*p.result == msg.size());
  p.start(io, buf);  // drained: waits for the next edge
  CHECK_FALSE(p.result);
  p.resetWriter();
  try {
    p.finish(io);
    FAIL("the read did not end");
  } catch (const boost::system::system_error& e) {
    CHECK(e.code() == asio::error::connection_reset);
  }
}

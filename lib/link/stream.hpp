// The byte-stream seam below Link and Connector (docs/transport.md): an
// ordered, reliable byte stream to one peer, a listener that accepts them,
// and a dialer that opens them to an opaque endpoint. Link and Connector know
// only this interface; tcp_stream.hpp (TCP) and memory_stream.hpp (an
// in-memory pair, for tests) implement it. Every operation runs on the
// stream's executor (the world's io_context); none is thread-safe.
// Awaitables throw boost::system::system_error: asio::error::eof once the
// peer has closed and everything it wrote has been read,
// asio::error::operation_aborted when this side closed the stream meanwhile;
// readSome, the one a link's every frame goes through, reports the same
// codes to a ReadDone instead.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/layer.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

namespace asio = boost::asio;

// Where a listener of some stream kind can be reached: the kind ("tcp",
// "mem") and an address only that kind parses ("10.0.0.7:4711", "[::1]:80",
// a name). Link and Connector pass it through and print `address`.
struct Endpoint {
  std::string kind;
  std::string address;
};

// Told how a Stream::readSome ended: `n` bytes read (at least 1), or `ec`
// (asio::error::eof once the peer has closed and everything it wrote has
// been read, operation_aborted when this side closed the stream meanwhile),
// with the `keep` the read was given back.
class ReadDone {
 public:
  virtual void onRead(const boost::system::error_code& ec, std::size_t n, std::shared_ptr<void> keep) = 0;

 protected:
  ~ReadDone() = default;
};

// The completion handler a stream's read gives Asio. It owns `keep`, what
// keeps `done` alive: a read that never completes (its event loop destroyed
// with it pending) lets go of it with the handler.
struct ReadHandler {
  ReadDone* done;
  std::shared_ptr<void> keep;
  void operator()(const boost::system::error_code& ec, std::size_t n) { done->onRead(ec, n, std::move(keep)); }
};

class Stream {
 public:
  virtual ~Stream() = default;
  // Connects a stream made by Dialer::open() to `to`; close() aborts it.
  // Throws system_error (connection_refused, ...) or std::invalid_argument
  // for an endpoint of another kind.
  virtual asio::awaitable<void> connect(const Endpoint& to) = 0;

  // Starts one read of what has arrived, at least 1 and at most buf.size()
  // bytes, waiting until something has (over a socket: one
  // async_read_some-like read, which tries the read at once and waits for
  // readiness only when nothing is there; over TCP, after a read that
  // drained the socket, it waits without trying: drained_read.hpp). `done`
  // is told how it ended on the stream's executor, never inside this call;
  // `buf` stays valid until then, and `keep` keeps `done` alive. One read at
  // a time. A plain callback, not an awaitable: a link reads every frame
  // through it, and a coroutine frame per read is what the read side does
  // not pay for.
  virtual void readSome(asio::mutable_buffer buf, ReadDone& done, std::shared_ptr<void> keep) = 0;
  // Reads exactly buf.size() bytes (however many pieces they arrive in).
  virtual asio::awaitable<void> read(asio::mutable_buffer buf) = 0;

  // Writes what fits now of the gathered buffers, without waiting (0 with
  // would_block when nothing does). One system call over TCP.
  virtual std::size_t writeSomeNow(std::span<const asio::const_buffer> bufs, boost::system::error_code& ec) = 0;
  // Writes all of `bufs`; the bytes they point to stay valid until it ends.
  virtual asio::awaitable<void> write(std::vector<asio::const_buffer> bufs) = 0;

  // Closes both directions: the peer reads EOF after what was written; this
  // side's pending operations end with operation_aborted. Idempotent.
  virtual void close() = 0;
  // The peer in words ("10.0.0.7:4711"; "?" when not known), for logs and errors.
  virtual const std::string& peer() const = 0;
  virtual asio::any_io_executor executor() = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  // The next incoming stream, connected. Throws system_error: a transient
  // failure (out of descriptors), or operation_aborted after close().
  virtual asio::awaitable<std::shared_ptr<Stream>> accept() = 0;
  // Where peers reach it (as bound: a TCP port chosen by the system is filled in).
  virtual Endpoint address() const = 0;
  virtual bool isOpen() const = 0;
  virtual void close() = 0;
};

class Dialer {
 public:
  virtual ~Dialer() = default;
  // A stream not connected yet: connect() it. Made first so that a deadline
  // can close() it while the connect runs.
  virtual std::shared_ptr<Stream> open() = 0;
};

}  // namespace tether::link

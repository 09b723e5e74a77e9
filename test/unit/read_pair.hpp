// A connected socket pair for the link layer's read tests (unix_stream_test,
// drained_read_test): one end read through a link::SocketStream as a link
// reads it, the other written raw by the test. `start` begins one readSome
// and runs the loop as far as it goes without waiting; `finish` runs it until
// the read ends, failing (not hanging) after 5 s if it never does.
#pragma once

#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/system/system_error.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "link/socket_stream.hpp"

namespace tether::test {

template <class Socket>
struct ReadPair {
  struct PairStream final : link::SocketStream<Socket> {
    using link::SocketStream<Socket>::SocketStream;
    boost::asio::awaitable<void> connect(const link::Endpoint&) override {
      throw std::logic_error("connected already");
    }
    void configure() override {}  // the test sets what it needs on its sockets
  };

  // {writer, reader}: a connected pair.
  explicit ReadPair(std::pair<Socket, Socket> ends)
      : writer(std::move(ends.first)), stream(std::make_unique<PairStream>(std::move(ends.second), "pair")) {}

  void start(boost::asio::io_context& io, std::vector<unsigned char>& buf) {
    result.reset();
    error = nullptr;
    stream->readSome(boost::asio::buffer(buf), done, nullptr);
    io.restart();  // a run that ran out of work left it stopped
    io.poll();
  }
  void finish(boost::asio::io_context& io) {
    io.restart();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!result && std::chrono::steady_clock::now() < until) io.run_one_until(until);
    if (!result) FAIL("the read never ended: it waits for a readiness edge that will not come");
    if (error) std::rethrow_exception(error);
  }

  // How the read ended: its bytes, and its error as the exception a caller would see.
  struct Done final : link::ReadDone {
    explicit Done(ReadPair& p) : pair(p) {}
    void onRead(const boost::system::error_code& ec, std::size_t n, std::shared_ptr<void>) override {
      pair.error = ec ? std::make_exception_ptr(boost::system::system_error(ec)) : nullptr;
      pair.result = n;
    }
    ReadPair& pair;
  };

  Socket writer;
  std::unique_ptr<link::Stream> stream;
  std::optional<std::size_t> result;
  std::exception_ptr error;
  Done done{*this};
};

}  // namespace tether::test

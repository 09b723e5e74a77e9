// The handshake's watchdog (connector.cpp, connector_dial.cpp): closes a
// stream whose handshake passes its deadline. Progress thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>

#include "base/layer.hpp"
#include "link/connector.hpp"

TETHER_LAYER(3, "link");

namespace tether::link {

// Closes the stream when the deadline passes; shares ownership so a late
// timer callback never touches a destroyed stream.
struct Watchdog {
  struct Flags {
    bool expired = false;
    unsigned armed = 0;  // which arming may still close the stream (0: none)
  };
  Watchdog(asio::io_context& io, std::shared_ptr<Stream> s, Clock::time_point deadline)
      : timer(io), stream(std::move(s)), flags(std::make_shared<Flags>()) {
    arm(deadline);
  }
  ~Watchdog() { timer.cancel(); }
  bool expired() const { return flags->expired; }
  // Moves the deadline (unless it has passed already). A callback of the
  // earlier arming that is already queued (too late to cancel) does nothing.
  void extend(Clock::time_point deadline) {
    if (!flags->expired) arm(deadline);
  }
  // The handshake is done (or committed): the stream goes to a link, and a
  // deadline whose callback is already queued must not close it.
  void disarm() {
    flags->armed = 0;
    timer.cancel();
  }
  void arm(Clock::time_point deadline) {
    const unsigned arming = ++generation;
    flags->armed = arming;
    timer.expires_at(deadline);
    timer.async_wait([s = stream, f = flags, arming](boost::system::error_code ec) {
      if (ec || f->armed != arming) return;
      f->expired = true;
      s->close();
    });
  }
  asio::steady_timer timer;
  std::shared_ptr<Stream> stream;
  std::shared_ptr<Flags> flags;
  unsigned generation = 0;
};

}  // namespace tether::link

// For a test case that runs once per rendezvous, a Catch2 section each:
// host-local aggregation (TETHER_RENDEZVOUS=auto, the default) and the root
// star (TETHER_RENDEZVOUS=root, every rank registering with the root itself).
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

namespace tether::test {

// Sets TETHER_RENDEZVOUS for this run of the test case (forked ranks inherit
// it); unset again when it goes out of scope, even after a failed REQUIRE.
class RendezvousSection {
 public:
  RendezvousSection() {
    SECTION("host-local aggregation (the default)") {}
    SECTION("the root star (TETHER_RENDEZVOUS=root)") { kind_ = "root"; }
    ::setenv("TETHER_RENDEZVOUS", kind_.c_str(), 1);
  }
  ~RendezvousSection() { ::unsetenv("TETHER_RENDEZVOUS"); }
  RendezvousSection(const RendezvousSection&) = delete;
  RendezvousSection& operator=(const RendezvousSection&) = delete;
  bool rootStar() const { return kind_ == "root"; }

 private:
  std::string kind_ = "auto";
};

}  // namespace tether::test

// UniqueId: string round trip, validation, IPv4/IPv6 roots, address parsing
// and interface filters.
#include <catch2/catch.hpp>

#include <set>

#include "base/endpoint.hpp"
#include "tether/tcp_bootstrap.hpp"
#include "wire/frame.hpp"

using namespace tether;

TEST_CASE("UniqueId survives toString/fromString and names its root", "[unit][uid]") {
  auto id = TcpBootstrap::createUniqueId("127.0.0.1:0");
  auto text = id.toString();
  CHECK(text.size() == 256);
  auto back = UniqueId::fromString(text + "\n");  // a trailing newline from a file is fine
  CHECK(back == id);
  CHECK(back.rootHost() == "127.0.0.1");
  CHECK(back.rootPort() != 0);
  CHECK(back.version() == tether::wire::kProtocolVersion);
  TcpBootstrap::forgetUniqueId(id);

  auto v6 = TcpBootstrap::uniqueIdFromRoot("[::1]:29500");
  CHECK(v6.rootHost() == "::1");
  CHECK(v6.rootPort() == 29500);
}

TEST_CASE("UniqueId secrets are random; address-derived ids are stable", "[unit][uid]") {
  std::set<std::string> seen;
  for (int i = 0; i < 8; ++i) {
    auto id = TcpBootstrap::createUniqueId("127.0.0.1:4242");
    seen.insert(id.toString());
  }
  CHECK(seen.size() == 8);
  CHECK(TcpBootstrap::uniqueIdFromRoot("127.0.0.1:4242") == TcpBootstrap::uniqueIdFromRoot("127.0.0.1:4242"));
  CHECK(TcpBootstrap::uniqueIdFromRoot("127.0.0.1:4242") != TcpBootstrap::uniqueIdFromRoot("127.0.0.1:4243"));
}

TEST_CASE("UniqueId::fromString rejects damage with a reason", "[unit][uid]") {
  auto text = TcpBootstrap::uniqueIdFromRoot("10.1.2.3:5000").toString();
  auto reason = [](const std::string& t) {
    try {
      UniqueId::fromString(t);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(reason(text.substr(0, 100)).find("expected 256 hex characters") != std::string::npos);
  auto bad = text;
  bad[10] = 'z';
  CHECK(reason(bad).find("non-hex") != std::string::npos);
  bad = text;
  bad[0] = bad[0] == '0' ? '1' : '0';
  CHECK(reason(bad).find("wrong magic") != std::string::npos);
  bad = text;
  bad[70] = bad[70] == '0' ? '1' : '0';  // inside the secret
  CHECK(reason(bad).find("checksum") != std::string::npos);
}

TEST_CASE("host:port parsing", "[unit][endpoint]") {
  auto a = parseHostPort("node7:29500");
  CHECK(a.host == "node7");
  CHECK(a.port == 29500);
  auto b = parseHostPort("[fe80::1]:80");
  CHECK(b.host == "fe80::1");
  CHECK(b.port == 80);
  auto c = parseHostPort("::1");
  CHECK(c.host == "::1");
  CHECK(c.port == 0);
  CHECK_THROWS_AS(parseHostPort("host:70000"), Error);
  CHECK_THROWS_AS(parseHostPort(":80"), Error);
  CHECK_THROWS_AS(parseHostPort("[::1"), Error);
}

TEST_CASE("TETHER_SOCKET_IFNAME filters", "[unit][endpoint]") {
  CHECK(interfaceMatches("eth,ib", "eth0"));
  CHECK(interfaceMatches("eth,ib", "ib1"));
  CHECK_FALSE(interfaceMatches("eth,ib", "lo"));
  CHECK_FALSE(interfaceMatches("^docker,lo", "docker0"));
  CHECK(interfaceMatches("^docker,lo", "eth0"));
  CHECK(interfaceMatches("=eth0", "eth0"));
  CHECK_FALSE(interfaceMatches("=eth0", "eth01"));
  CHECK_FALSE(interfaceMatches("^=eth0", "eth0"));
  CHECK(interfaceMatches("^=eth0", "eth01"));
}

#include <memory>

#include <tether/adapters/mscclpp.hpp>
#include <tether/tcp_bootstrap.hpp>

// Rank, size and root come from the launcher (docs/configuration.md).
std::shared_ptr<mscclpp::Communicator> makeCommunicator() {
  std::shared_ptr<tether::Bootstrap> tcp = tether::TcpBootstrap::fromEnvironment();
  auto bootstrap = std::make_shared<tether::adapters::BootstrapFor<mscclpp::Bootstrap>>(tcp);
  return std::make_shared<mscclpp::Communicator>(bootstrap);
}

// stress_rank.cpp — what one forked rank does: join its namespace, start its
// proxy, join the world, split, run the world and child programs at once, and
// write its tally to the parent's pipe.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <exception>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "executor.hpp"
#include "stress_rank.hpp"
#include "tether/tcp_bootstrap.hpp"

namespace tether::stress {

void enterNetns(const std::string& name) {
  std::string path = "/var/run/netns/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  int rc = ::setns(fd, CLONE_NEWNET);
  ::close(fd);
  if (rc != 0) throw std::runtime_error("setns into " + name + " failed");
}

namespace {
std::string describe(const std::exception_ptr& error) {
  if (!error) return "ok";
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return std::string("tether::Error[") + toString(e.code()) + "]: " + e.what();
  } catch (const std::exception& e) {
    return e.what();
  }
}
}  // namespace

std::string rankBody(int rank, const UniqueId& id, const StressConfig& config) {
  if (!config.netns.empty()) enterNetns(config.netns[static_cast<std::size_t>(rank) % config.netns.size()]);

  std::unique_ptr<chaos::ChaosProxy> proxy;
  TcpOptions options;
  options.timeout = config.callTimeout;
  if (config.proxy) {
    auto chaosOptions = config.chaos;
    chaosOptions.seed = config.chaos.seed * 7919 + static_cast<std::uint64_t>(rank);
    proxy = std::make_unique<chaos::ChaosProxy>(chaosOptions);
    // Peers reach this rank only through its proxy.
    options.advertiseFor = [&proxy](const std::string& listen) {
      auto host = chaos::splitHostPort(listen).first;
      bool v6 = host.find(':') != std::string::npos;
      proxy->start(listen, (v6 ? "[" + host + "]" : host) + ":0");
      return proxy->endpoint();
    };
  }

  RankTally tally;
  {
    TcpBootstrap world(rank, config.nranks, id, options);
    // Two children (even and odd world ranks), ordered by descending world rank.
    const int color = rank % 2;
    auto child = world.split(color, config.nranks - rank);
    auto worldProgram =
        makeProgram({config.seed, 0, world.size(), config.ops, config.p2pThreads, config.kinds, config.maxBlock});
    auto childProgram =
        makeProgram({config.seed, static_cast<std::uint32_t>(1 + color), child->size(),
                     config.childToo ? config.ops : 0, config.p2pThreads, config.kinds, config.maxBlock});

    // Both communicators at once, from two threads. A failure on one aborts
    // the other; the report names both so the first cause is not lost.
    std::exception_ptr childError, worldError;
    std::thread childThread([&] {
      try {
        runProgram(*child, static_cast<std::uint32_t>(1 + color), config.seed, childProgram, tally);
      } catch (...) {
        childError = std::current_exception();
        world.abort("child communicator failed");
      }
    });
    try {
      runProgram(world, 0, config.seed, worldProgram, tally);
    } catch (...) {
      worldError = std::current_exception();
      child->abort("world communicator failed");
    }
    childThread.join();
    if (worldError || childError) {
      throw std::runtime_error("world: " + describe(worldError) + "; child: " + describe(childError));
    }
    world.barrier();  // nobody leaves while a peer still needs it
  }
  if (proxy) proxy->stop();

  std::ostringstream out;
  out << "OPS " << tally.ops << "\nBLOCKS " << tally.blocks << "\nMISMATCHES " << tally.mismatches << "\nBYTES "
      << tally.bytes << '\n';
  for (const auto& line : tally.firstMismatches) out << "MISMATCH " << line << '\n';
  return out.str();
}

}  // namespace tether::stress

// The TCP implementation of tether::Request::Impl (requests.cpp): one
// operation started on a world, with the communicator that started it.
#pragma once

#include <memory>
#include <vector>

#include "base/layer.hpp"
#include "core/completion.hpp"
#include "core/op.hpp"
#include "tether/request.hpp"

TETHER_LAYER(6, "core");

namespace tether {

class Communicator;

// `keep`: memory the operation reads until it ends; `deadline`: its
// Op::expires (the communicator's timeout from the start).
std::unique_ptr<Request::Impl> makeRequest(std::shared_ptr<Communicator> comm, std::shared_ptr<Op> op,
                                           std::shared_ptr<Completion> done, std::vector<unsigned char> keep,
                                           Op::Clock::time_point deadline);

}  // namespace tether

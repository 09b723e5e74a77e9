// tether/tether.hpp — everything a runtime needs, in one include.
#pragma once

#include "tether/bootstrap.hpp"
#include "tether/error.hpp"
#include "tether/forwarding_bootstrap.hpp"
#include "tether/log.hpp"
#include "tether/tcp_bootstrap.hpp"
#include "tether/unique_id.hpp"
#include "tether/version.h"
